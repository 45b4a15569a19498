package serve

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The front door's figures (docs/performance.md), each measured against a
// direct connection to the same upstream in the same run, so that the
// machine's load shows in both: added latency (median, p99), throughput
// with 64 concurrent clients, and the time to a stream's first byte.

// benchUpstream answers small bodies at once, and /stream's first event
// at once.
func benchUpstream(b *testing.B) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: first\n\n")
		w.(http.Flusher).Flush()
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/v1/slow" { // a short generation: the server's time, not its CPU
			time.Sleep(20 * time.Millisecond)
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"cmpl-1","choices":[{"text":"ok"}]}`)
	})
	s := httptest.NewServer(mux)
	b.Cleanup(s.Close)
	return s
}

// benchDoor is a ready door in front of up.
func benchDoor(b *testing.B, up string) string {
	d := New(Config{Upstream: up, Health: "/health", Hold: time.Minute, MaxHeld: 100000, Retry: true, Priority: P0}, Options{})
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	healthy := make(chan struct{})
	d.opts.OnHealthy = func(int) { close(healthy) }
	done := make(chan error, 1)
	go func() { done <- d.Serve(ln) }()
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = d.Close(ctx)
		<-done
	})
	d.Launched(1)
	<-healthy
	return "http://" + ln.Addr().String()
}

func benchClient(b *testing.B, conns int) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}
	b.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func roundTrip(c *http.Client, url string) error {
	resp, err := c.Post(url, "application/json", strings.NewReader(`{"prompt":"hi","max_tokens":1}`))
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

func quantile(d []time.Duration, q float64) time.Duration {
	slices.Sort(d)
	return d[min(len(d)-1, int(q*float64(len(d))))]
}

// BenchmarkDoorLatency: one keep-alive client, small bodies, alternating
// direct and through the door; reports each side's median and p99 and
// the difference (µs added by the door).
func BenchmarkDoorLatency(b *testing.B) {
	up := benchUpstream(b)
	door := benchDoor(b, up.URL)
	direct, via := benchClient(b, 1), benchClient(b, 1)
	for range 200 { // warm both paths' connections and caches
		_ = roundTrip(direct, up.URL+"/v1/completions")
		_ = roundTrip(via, door+"/v1/completions")
	}
	var dd, vd []time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if err := roundTrip(direct, up.URL+"/v1/completions"); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := roundTrip(via, door+"/v1/completions"); err != nil {
			b.Fatal(err)
		}
		dd, vd = append(dd, t1.Sub(t0)), append(vd, time.Since(t1))
	}
	b.StopTimer()
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	dm, vm, dp, vp := quantile(dd, 0.5), quantile(vd, 0.5), quantile(dd, 0.99), quantile(vd, 0.99)
	b.ReportMetric(us(dm), "direct-median-µs")
	b.ReportMetric(us(vm), "door-median-µs")
	b.ReportMetric(us(vm-dm), "added-median-µs")
	b.ReportMetric(us(vp-dp), "added-p99-µs")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkDoorThroughput: 64 concurrent keep-alive clients for a fixed
// time, direct then through the door; reports both rates and their ratio.
// "instant": the upstream answers at once, so the figure is the door's
// own CPU cost against the client's and server's (on a small machine the
// three share the same cores); "20ms": each answer takes 20 ms, as even a
// short generation does, and the ratio shows what clients see.
func BenchmarkDoorThroughput(b *testing.B) {
	for _, c := range []struct{ name, path string }{{"instant", "/v1/completions"}, {"20ms", "/v1/slow"}} {
		b.Run(c.name, func(b *testing.B) { doorThroughput(b, c.path) })
	}
}

func doorThroughput(b *testing.B, path string) {
	const clients = 64
	up := benchUpstream(b)
	door := benchDoor(b, up.URL)
	window := 2 * time.Second
	rate := func(url string) float64 {
		c := benchClient(b, clients)
		var n atomic.Int64
		var wg sync.WaitGroup
		stop := time.Now().Add(window)
		for range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(stop) {
					if err := roundTrip(c, url); err != nil {
						b.Error(err)
						return
					}
					n.Add(1)
				}
			}()
		}
		wg.Wait()
		return float64(n.Load()) / window.Seconds()
	}
	var direct, via float64
	for range b.N {
		direct += rate(up.URL + path)
		via += rate(door + path)
	}
	b.ReportMetric(direct/float64(b.N), "direct-req/s")
	b.ReportMetric(via/float64(b.N), "door-req/s")
	b.ReportMetric(via/direct, "ratio")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkDoorFirstByte: the time from sending a streaming request to
// reading its first event, direct and through the door.
func BenchmarkDoorFirstByte(b *testing.B) {
	up := benchUpstream(b)
	door := benchDoor(b, up.URL)
	direct, via := benchClient(b, 1), benchClient(b, 1)
	first := func(c *http.Client, url string) time.Duration {
		t0 := time.Now()
		resp, err := c.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
			b.Fatal(err)
		}
		took := time.Since(t0)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return took
	}
	for range 100 {
		first(direct, up.URL+"/stream")
		first(via, door+"/stream")
	}
	var dd, vd []time.Duration
	b.ResetTimer()
	for range b.N {
		dd = append(dd, first(direct, up.URL+"/stream"))
		vd = append(vd, first(via, door+"/stream"))
	}
	b.StopTimer()
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	b.ReportMetric(us(quantile(dd, 0.5)), "direct-ttfb-µs")
	b.ReportMetric(us(quantile(vd, 0.5)), "door-ttfb-µs")
	b.ReportMetric(us(quantile(vd, 0.5)-quantile(dd, 0.5)), "added-ttfb-µs")
	b.ReportMetric(0, "ns/op")
}
