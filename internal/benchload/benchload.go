// Package benchload drives an HTTP server from the front door's
// benchmarks (internal/serve's, on an in-process upstream, and bench's,
// on the real binary and model-server stand-ins): keep-alive clients, a
// closed-loop load of many clients for a window, and the quantiles of
// what they measured.
package benchload

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Client is a client that keeps up to conns connections to each host,
// closed when the benchmark ends.
func Client(tb testing.TB, conns int) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}
	tb.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// Post sends body (JSON) to url and reads the answer to its end; an answer
// other than 200 is an error.
func Post(c *http.Client, url, body string) error {
	resp, err := c.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// Closed runs clients goroutines, each sending one request after the
// other (send) until d has passed, and answers how many were answered;
// a failed request is reported to tb and ends its goroutine.
func Closed(tb testing.TB, clients int, d time.Duration, send func() error) int64 {
	var n atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	for range clients {
		wg.Go(func() {
			for time.Now().Before(stop) {
				if err := send(); err != nil {
					tb.Error(err)
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	return n.Load()
}

// FirstLine is how long send takes to bring back an answer's first line
// (a stream's first event); the rest is read and dropped.
func FirstLine(tb testing.TB, send func() (*http.Response, error)) time.Duration {
	t0 := time.Now()
	resp, err := send()
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		tb.Fatal(err)
	}
	took := time.Since(t0)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return took
}

// Quantile is the q quantile of d (which it sorts).
func Quantile(d []time.Duration, q float64) time.Duration {
	slices.Sort(d)
	return d[min(len(d)-1, int(q*float64(len(d))))]
}

// Micros is d in microseconds, for a benchmark's metric.
func Micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
