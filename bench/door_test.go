package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// doorPolicy is a two-profile ladder of live = false profiles (a step is
// a restart, as for vLLM), with a front door when listen is set.
func doorPolicy(listen, upstream string) string {
	p := `
[watch]
interval = "100ms"
[restart]
backoff      = "100ms"
stop_timeout = "10s"
release_timeout = "1s"
[[profile]]
name = "fp16"
[[profile]]
name = "int8"
`
	if listen != "" {
		p += fmt.Sprintf("[serve]\nlisten = %q\nupstream = \"http://%s\"\nhold = \"60s\"\nmax_held = 100000\n", listen, upstream)
	}
	return p
}

func freeAddr(b *testing.B) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// waitOK waits until GET url answers 200.
func waitOK(b *testing.B, url string, d time.Duration) {
	b.Helper()
	c := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if resp, err := c.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.Fatalf("%s did not answer 200 within %s", url, d)
}

// BenchmarkDoorRestart is the measurement of issue 21's "Why": a server
// that loads for 3 s, 200 requests a second (open loop: one new request
// every 5 ms, whatever the answers do), and one planned restart (`gpuguard
// step` into a live = false profile). Without a front door the clients
// talk to the child's port and every request while it reloads is
// refused; through the door none fails. Reported per mode: the requests
// sent and the share that failed, over the window from 1 s before the
// step to 1 s after the new child answers.
func BenchmarkDoorRestart(b *testing.B) {
	defer reportLoad(b)()
	for _, mode := range []string{"direct", "door"} {
		var sent, failed int
		for range b.N {
			s, f := doorRestart(b, mode == "door")
			sent, failed = sent+s, failed+f
		}
		b.ReportMetric(float64(sent)/float64(b.N), mode+"-requests")
		b.ReportMetric(100*float64(failed)/float64(sent), mode+"-failed-%")
	}
	b.ReportMetric(0, "ns/op")
}

func doorRestart(b *testing.B, withDoor bool) (sent, failed int) {
	s := newSandbox(b)
	child, listen := freeAddr(b), ""
	target := "http://" + child
	if withDoor {
		listen = freeAddr(b)
		target = "http://" + listen
	}
	g := s.start("restart", s.policy("restart", doorPolicy(listen, child)), nil, childBin, "http", child, "3s", "0s")
	waitOK(b, "http://"+child+"/health", 30*time.Second)
	if withDoor {
		waitOK(b, target+"/gpuguard/v1/status", 30*time.Second)
	}
	var nSent, nFailed atomic.Int64
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	stop := make(chan struct{})
	go func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			wg.Add(1)
			nSent.Add(1)
			go func() {
				defer wg.Done()
				resp, err := client.Get(target + "/v1/completions")
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err == nil && resp.StatusCode != 200 {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				if err != nil {
					nFailed.Add(1)
				}
			}()
		}
	}()
	time.Sleep(time.Second) // steady load before the step
	out, err := exec.Command(bin, "step", "restart", "down", "--runtime-dir", s.runDir).CombinedOutput()
	if err != nil {
		b.Fatalf("step: %v: %s", err, out)
	}
	waitOK(b, "http://"+child+"/health", 30*time.Second) // the new child listens
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	g.stop()
	return int(nSent.Load()), int(nFailed.Load())
}

// BenchmarkDoorHeld: gpuguard's memory with 1,000 requests held while its
// child loads (it never finishes): the RSS it adds per held request, and
// the RSS with 1,000 held.
func BenchmarkDoorHeld(b *testing.B) {
	defer reportLoad(b)()
	const n = 1000
	for range b.N {
		s := newSandbox(b)
		child, listen := freeAddr(b), freeAddr(b)
		g := s.start("held", s.policy("held", doorPolicy(listen, child)), nil, childBin, "http", child, "1h", "0s")
		status := func() (held int) {
			resp, err := http.Get("http://" + listen + "/gpuguard/v1/status")
			if err != nil {
				return -1
			}
			defer resp.Body.Close()
			var st struct {
				Held  int  `json:"held"`
				Ready bool `json:"ready"`
			}
			if json.NewDecoder(resp.Body).Decode(&st) != nil || st.Ready {
				return -1
			}
			return st.Held
		}
		for status() != 0 {
			time.Sleep(20 * time.Millisecond)
		}
		before := memKiB(b, g.cmd.Process.Pid, "VmRSS:")
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+listen+"/v1/completions",
					strings.NewReader(`{"prompt":"hi"}`))
				c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
				if resp, err := c.Do(req); err == nil {
					resp.Body.Close()
				}
			}()
		}
		deadline := time.Now().Add(60 * time.Second)
		for status() != n {
			if time.Now().After(deadline) {
				b.Fatalf("held %d of %d", status(), n)
			}
			time.Sleep(20 * time.Millisecond)
		}
		after := memKiB(b, g.cmd.Process.Pid, "VmRSS:")
		b.ReportMetric(float64(after)/1024, "rss-MiB")
		b.ReportMetric(float64(after-before)/n, "KiB/held")
		cancel()
		wg.Wait()
		g.stop()
	}
	b.ReportMetric(0, "ns/op")
}
