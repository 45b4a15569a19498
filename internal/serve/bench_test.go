package serve

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/internal/benchload"
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
	d.up.onHealthy = func(int) { close(healthy) }
	done := make(chan error, 1)
	// The label reaches every goroutine the door starts (its connections',
	// and its transport's to the upstream): a CPU profile of a benchmark
	// shows the door's own share with -tagfocus side=door.
	go pprof.Do(context.Background(), pprof.Labels("side", "door"), func(context.Context) { done <- d.Serve(ln) })
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

// roundTrip sends one small completion to url.
func roundTrip(c *http.Client, url string) error {
	return benchload.Post(c, url, `{"prompt":"hi","max_tokens":1}`)
}

// BenchmarkDoorLatency: one keep-alive client, small bodies, alternating
// direct and through the door; reports each side's median and p99 and
// the difference (µs added by the door).
func BenchmarkDoorLatency(b *testing.B) {
	up := benchUpstream(b)
	door := benchDoor(b, up.URL)
	direct, via := benchload.Client(b, 1), benchload.Client(b, 1)
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
	us, quantile := benchload.Micros, benchload.Quantile
	dm, vm, dp, vp := quantile(dd, 0.5), quantile(vd, 0.5), quantile(dd, 0.99), quantile(vd, 0.99)
	b.ReportMetric(us(dm), "direct-median-µs")
	b.ReportMetric(us(vm), "door-median-µs")
	b.ReportMetric(us(vm-dm), "added-median-µs")
	b.ReportMetric(us(vp-dp), "added-p99-µs")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkDoorThroughput: 64 concurrent keep-alive clients, direct and
// through the door in alternating windows (so that a change in the
// machine's load falls on both), each side with its own client of 64
// kept connections, warmed before the first window; reports both rates
// and their ratio. "instant": the upstream answers at once, so the figure
// is the door's own CPU cost against the client's and server's (on a
// small machine the three share the same cores); "20ms": each answer
// takes 20 ms, as even a short generation does, and the ratio shows what
// clients see. reference-ratio is the field's plain ReverseProxy
// (referenceProxy) in the same rounds: what any Go proxy costs here;
// nginx-ratio is nginx's, with GPUGUARD_BENCH_NGINX=/usr/sbin/nginx.
func BenchmarkDoorThroughput(b *testing.B) {
	for _, c := range []struct{ name, path string }{{"instant", "/v1/completions"}, {"20ms", "/v1/slow"}} {
		b.Run(c.name, func(b *testing.B) { doorThroughput(b, c.path) })
	}
}

func doorThroughput(b *testing.B, path string) {
	const (
		clients = 64
		rounds  = 4 // windows per side
		window  = 500 * time.Millisecond
	)
	up := benchUpstream(b)
	door := benchDoor(b, up.URL)
	// count runs the clients against url for d and answers how many
	// requests were answered.
	count := func(c *http.Client, url string, d time.Duration) int64 {
		return benchload.Closed(b, clients, d, func() error { return roundTrip(c, url) })
	}
	ref := referenceProxy(b, up.URL)
	dc, vc, rc := benchload.Client(b, clients), benchload.Client(b, clients), benchload.Client(b, clients)
	count(dc, up.URL+path, window/2) // open and warm every connection
	count(vc, door+path, window/2)
	count(rc, ref+path, window/2)
	ngx := nginxProxy(b, up.URL)
	nc := benchload.Client(b, clients)
	if ngx != "" {
		count(nc, ngx+path, window/2)
	}
	var direct, via, refN, ngxN int64
	var directCPU, viaCPU, refCPU time.Duration
	b.ResetTimer()
	for range b.N {
		for range rounds {
			t0 := cpuTime()
			direct += count(dc, up.URL+path, window)
			t1 := cpuTime()
			via += count(vc, door+path, window)
			t2 := cpuTime()
			refN += count(rc, ref+path, window)
			directCPU, viaCPU, refCPU = directCPU+t1-t0, viaCPU+t2-t1, refCPU+cpuTime()-t2
			if ngx != "" {
				ngxN += count(nc, ngx+path, window)
			}
		}
	}
	b.StopTimer()
	secs := float64(b.N) * rounds * window.Seconds()
	b.ReportMetric(float64(direct)/secs, "direct-req/s")
	b.ReportMetric(float64(via)/secs, "door-req/s")
	b.ReportMetric(float64(via)/float64(direct), "ratio")
	b.ReportMetric(float64(refN)/float64(direct), "reference-ratio")
	if ngx != "" {
		b.ReportMetric(float64(ngxN)/float64(direct), "nginx-ratio")
	}
	// The CPU each request cost the process (client, upstream, and the
	// door's hop on the door's side): the ratio the door would reach if
	// the cores were the only limit is direct-cpu/door-cpu.
	perReq := func(cpu time.Duration, n int64) float64 {
		return float64(cpu) / float64(time.Microsecond) / float64(max(n, 1))
	}
	b.ReportMetric(perReq(directCPU, direct), "direct-cpu-µs/req")
	b.ReportMetric(perReq(viaCPU, via), "door-cpu-µs/req")
	b.ReportMetric(perReq(refCPU, refN), "reference-cpu-µs/req")
	b.ReportMetric(0, "ns/op")
}

// referenceProxy is the field's plain proxy in front of up, for a
// reference in the same windows: httputil.NewSingleHostReverseProxy on
// the default Transport, as llama-swap runs it, with nothing of the door
// (no gate, no retry, no headers of its own).
func referenceProxy(b *testing.B, up string) string {
	u, err := url.Parse(up)
	if err != nil {
		b.Fatal(err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 1024
	p := httputil.NewSingleHostReverseProxy(u)
	p.Transport = tr
	s := httptest.NewServer(p)
	b.Cleanup(func() { s.Close(); tr.CloseIdleConnections() })
	return s.URL
}

// nginxProxy is nginx (one worker, keep-alive to up) in front of up when
// $GPUGUARD_BENCH_NGINX names its binary, for a reference outside Go; ""
// without it.
func nginxProxy(b *testing.B, up string) string {
	bin := os.Getenv("GPUGUARD_BENCH_NGINX")
	if bin == "" {
		return ""
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := b.TempDir()
	conf := fmt.Sprintf(`daemon off; master_process off; worker_processes 1; pid %[1]s/nginx.pid;
error_log %[1]s/error.log; events { worker_connections 4096; }
http { access_log off; client_body_temp_path %[1]s; proxy_temp_path %[1]s;
  upstream child { server %[2]s; keepalive 128; }
  server { listen %[3]s; location / { proxy_pass http://child; proxy_http_version 1.1;
    proxy_set_header Connection ""; proxy_buffering off; } } }
`, dir, strings.TrimPrefix(up, "http://"), addr)
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", filepath.Join(dir, "nginx.conf"))
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for range 100 { // until it listens
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return "http://" + addr
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.Fatal("nginx did not listen")
	return ""
}

// BenchmarkDoorFirstByte: the time from sending a streaming request to
// reading its first event, direct and through the door.
func BenchmarkDoorFirstByte(b *testing.B) {
	up := benchUpstream(b)
	door := benchDoor(b, up.URL)
	direct, via := benchload.Client(b, 1), benchload.Client(b, 1)
	first := func(c *http.Client, url string) time.Duration {
		return benchload.FirstLine(b, func() (*http.Response, error) { return c.Get(url) })
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
	us, quantile := benchload.Micros, benchload.Quantile
	b.ReportMetric(us(quantile(dd, 0.5)), "direct-ttfb-µs")
	b.ReportMetric(us(quantile(vd, 0.5)), "door-ttfb-µs")
	b.ReportMetric(us(quantile(vd, 0.5)-quantile(dd, 0.5)), "added-ttfb-µs")
	b.ReportMetric(0, "ns/op")
}
