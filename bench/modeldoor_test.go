package bench

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/internal/benchload"
)

// The figures of `gpuguard door` (docs/performance.md, "One door for many
// models"), each against a direct connection to the upstream (an
// instance's own front door, or the bare server: see viaFrontDoor and
// bareServer) and, with $GPUGUARD_BENCH_LLAMA_SWAP naming its binary
// (built from source, not part of this repository), against llama-swap
// in front of the same upstream, all in the same run:
//
//	GPUGUARD_BENCH_LLAMA_SWAP=/tmp/llama-swap/llama-swap go test ./bench -run '^$' -bench '^BenchmarkModelDoor' -benchtime 1x
//
// The server is in-process (answering at once, or after 50 ms as a short
// generation does); the real `gpuguard door` binary and llama-swap run as
// processes of their own. Every benchmark measures each side in turn, so
// that the machine's load falls on all of them; each runs its measurement
// once per b.N (use -benchtime 1x).
var (
	modelDoorN    = flag.Int("modeldoor.n", 2000, "model door: round trips per side for latency and first byte")
	modelDoorIdle = flag.Duration("modeldoor.idle", 20*time.Second, "model door: how long the idle CPU is measured")
)

// modelDoors is the chain under test.
type modelDoors struct {
	direct, door, swap string // base URLs; swap "" without llama-swap
	doorPID, swapPID   int
}

// modelUpstream answers /health, and any POST at once, or after 50 ms
// when its body asks for "slow", or as a stream whose first event comes at
// once when it asks for one. The body says which, so that the paths stay
// the OpenAI ones that llama-swap routes.
func modelUpstream(b *testing.B) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch {
		case bytes.Contains(body, []byte(`"stream":true`)):
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: first\n\n")
			return
		case bytes.Contains(body, []byte(`"prompt":"slow"`)):
			time.Sleep(50 * time.Millisecond)
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"cmpl-1","choices":[{"text":"ok"}]}`)
	})
	s := httptest.NewServer(mux)
	b.Cleanup(s.Close)
	return s
}

// The upstreams the proxies are measured in front of.
const (
	// viaFrontDoor: the instance's own front door (a real `gpuguard run`
	// with [serve], its child an idle process) in front of the server: the
	// chain a client of `gpuguard door` meets, and direct is a connection
	// to that front door.
	viaFrontDoor = "frontdoor"
	// bareServer: the server itself, named by a stand-in instance's status
	// (a control socket that answers for it), as the issue measured
	// llama-swap: direct is a connection to the server, so each proxy's
	// own cost is the whole difference.
	bareServer = "server"
)

// startModelDoors builds the chain in front of upstream (viaFrontDoor or
// bareServer) and waits until each side answers.
func startModelDoors(b *testing.B, upstream string) *modelDoors {
	b.Helper()
	s := newSandbox(b)
	up := modelUpstream(b)
	md := &modelDoors{direct: up.URL}
	if upstream == viaFrontDoor {
		inst := freeAddr(b)
		pol := s.policy("m", fmt.Sprintf("[watch]\ninterval = \"200ms\"\n[serve]\nlisten = %q\nupstream = %q\nhold = \"60s\"\nmax_held = 100000\n", inst, up.URL))
		s.start("m", pol, nil, "sleep", "3600")
		waitOK(b, "http://"+inst+"/gpuguard/v1/status", 30*time.Second)
		md.direct = "http://" + inst
	} else {
		standIn(b, s.runDir, "m", strings.TrimPrefix(up.URL, "http://"))
	}

	addr := freeAddr(b)
	md.door, md.doorPID = "http://"+addr, startProcess(b, bin, "door", "--listen", addr, "--runtime-dir", s.runDir)
	waitRouted(b, md.door)

	if swapBin := os.Getenv("GPUGUARD_BENCH_LLAMA_SWAP"); swapBin != "" {
		md.swap, md.swapPID = startLlamaSwap(b, swapBin, s.dir, md.direct)
	}
	return md
}

// startPlainProxy runs bench/plainproxy, the field's plain ReverseProxy,
// in front of upstream: the floor of one more HTTP hop. Only the latency
// benchmark starts it, so that it idles beside no other measure.
func startPlainProxy(b *testing.B, upstream string) string {
	b.Helper()
	addr := freeAddr(b)
	startProcess(b, proxyBin, "-listen", addr, "-upstream", upstream)
	waitRouted(b, "http://"+addr)
	return "http://" + addr
}

// standIn is a control socket in runDir for an instance name whose front
// door is at addr: it answers every status request with a ready instance
// serving model m there.
func standIn(b *testing.B, runDir, name, addr string) {
	b.Helper()
	if err := os.MkdirAll(runDir, 0o700); err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(runDir, name+".sock"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	reply := fmt.Sprintf(`{"ok":true,"name":%q,"state":"running","ready":true,"profile":"default","serve":%q,"models":["m"],"gpus":[]}`+"\n", name, addr)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					if _, err := io.WriteString(c, reply); err != nil {
						return
					}
				}
			}()
		}
	}()
}

// waitRouted waits until a request for model m through base answers 200.
func waitRouted(b *testing.B, base string) {
	b.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if roundTripModel(c, base+"/v1/completions", "hi") == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.Fatalf("%s did not route model m within 60s", base)
}

// startLlamaSwap runs llama-swap with one model, m, whose server is the
// instance's front door (its "cmd" an idle process, since the server
// already runs); it keeps llama-swap's defaults but for logging and a
// concurrency limit that admits the 64 clients.
func startLlamaSwap(b *testing.B, swapBin, dir, upstream string) (string, int) {
	b.Helper()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		b.Fatal(err)
	}
	conf := filepath.Join(dir, "llama-swap.yaml")
	text := fmt.Sprintf(`healthCheckTimeout: 15
logLevel: error
logToStdout: none
models:
  m:
    cmd: %s 3600
    proxy: %s
    checkEndpoint: /health
    concurrencyLimit: 1024
`, sleep, upstream)
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		b.Fatal(err)
	}
	addr := freeAddr(b)
	pid := startProcess(b, swapBin, "-config", conf, "-listen", addr)
	waitRouted(b, "http://"+addr) // its first request starts the model
	return "http://" + addr, pid
}

// startProcess starts name with args, its output discarded, killed when
// the benchmark ends, and answers its pid.
func startProcess(b *testing.B, name string, args ...string) int {
	b.Helper()
	cmd := exec.Command(name, args...)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd.Process.Pid
}

// sides are the bases to compare, in the order measured.
func (md *modelDoors) sides() []string {
	s := []string{md.direct, md.door}
	if md.swap != "" {
		s = append(s, md.swap)
	}
	return s
}

// roundTripModel sends one completion for model m with prompt.
func roundTripModel(c *http.Client, url, prompt string) error {
	return benchload.Post(c, url, `{"model":"m","prompt":"`+prompt+`","max_tokens":1}`)
}

// BenchmarkModelDoorLatency: one keep-alive client per side, small bodies,
// the sides in turn for each round trip; reports the direct median and
// what each proxy adds to the median and to p99: the door, llama-swap, and
// the plain ReverseProxy (plain-added), the floor of any Go proxy's hop.
func BenchmarkModelDoorLatency(b *testing.B) {
	for _, up := range []string{viaFrontDoor, bareServer} {
		b.Run("upstream="+up, func(b *testing.B) { modelDoorLatency(b, up) })
	}
}

func modelDoorLatency(b *testing.B, upstream string) {
	defer reportLoad(b)()
	md := startModelDoors(b, upstream)
	sides := append(md.sides(), startPlainProxy(b, md.direct)) // the plain proxy last
	clients := make([]*http.Client, len(sides))
	for i := range sides {
		clients[i] = benchload.Client(b, 1)
	}
	for range b.N {
		took := make([][]time.Duration, len(sides))
		for n := range *modelDoorN + 200 {
			for i, base := range sides {
				t0 := time.Now()
				if err := roundTripModel(clients[i], base+"/v1/completions", "hi"); err != nil {
					b.Fatal(base, err)
				}
				if n >= 200 { // the first 200 warm the connections and caches
					took[i] = append(took[i], time.Since(t0))
				}
			}
		}
		med, p99 := benchload.Quantile(took[0], 0.5), benchload.Quantile(took[0], 0.99)
		b.ReportMetric(benchload.Micros(med), "direct-median-µs")
		b.ReportMetric(benchload.Micros(benchload.Quantile(took[1], 0.5)-med), "door-added-median-µs")
		b.ReportMetric(benchload.Micros(benchload.Quantile(took[1], 0.99)-p99), "door-added-p99-µs")
		if len(sides) > 3 {
			b.ReportMetric(benchload.Micros(benchload.Quantile(took[2], 0.5)-med), "swap-added-median-µs")
			b.ReportMetric(benchload.Micros(benchload.Quantile(took[2], 0.99)-p99), "swap-added-p99-µs")
		}
		plain := took[len(took)-1]
		b.ReportMetric(benchload.Micros(benchload.Quantile(plain, 0.5)-med), "plain-added-median-µs")
		b.ReportMetric(benchload.Micros(benchload.Quantile(plain, 0.99)-p99), "plain-added-p99-µs")
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkModelDoorThroughput: 64 concurrent keep-alive clients per side,
// the sides in alternating windows (10 rounds of 300 ms each), each with its
// own 64 warmed connections. "instant": the upstream answers at once, so
// the proxies' CPU competes with the client's, the front door's and the
// upstream's on the same cores; "50ms": each answer takes 50 ms, as a
// short generation does, and the ratio is what clients see. Also each
// proxy's own CPU per request (its process's utime+stime over its windows).
func BenchmarkModelDoorThroughput(b *testing.B) {
	for _, up := range []string{viaFrontDoor, bareServer} {
		for _, c := range []struct{ name, prompt string }{{"instant", "hi"}, {"50ms", "slow"}} {
			b.Run("upstream="+up+"/"+c.name, func(b *testing.B) { modelDoorThroughput(b, up, c.prompt) })
		}
	}
}

func modelDoorThroughput(b *testing.B, upstream, prompt string) {
	defer reportLoad(b)()
	const (
		conns  = 64
		rounds = 10 // short windows, many times: the machine's load moves less within one
		window = 300 * time.Millisecond
	)
	md := startModelDoors(b, upstream)
	sides := md.sides()
	pids := []int{0, md.doorPID, md.swapPID}
	count := func(c *http.Client, url string, d time.Duration) int64 {
		return benchload.Closed(b, conns, d, func() error {
			if err := roundTripModel(c, url, prompt); err != nil {
				return fmt.Errorf("%s: %w", url, err)
			}
			return nil
		})
	}
	clients := make([]*http.Client, len(sides))
	for i, base := range sides {
		clients[i] = benchload.Client(b, conns)
		count(clients[i], base+"/v1/completions", window/2) // open and warm every connection
	}
	for range b.N {
		done := make([]int64, len(sides))
		cpu := make([]time.Duration, len(sides))
		for range rounds {
			for i, base := range sides {
				var c0 time.Duration
				if pids[i] != 0 {
					c0, _, _ = cpuTime(b, pids[i])
				}
				done[i] += count(clients[i], base+"/v1/completions", window)
				if pids[i] != 0 {
					c1, _, _ := cpuTime(b, pids[i])
					cpu[i] += c1 - c0
				}
			}
		}
		secs := float64(rounds) * window.Seconds()
		b.ReportMetric(float64(done[0])/secs, "direct-req/s")
		b.ReportMetric(float64(done[1])/secs, "door-req/s")
		b.ReportMetric(float64(done[1])/float64(done[0]), "door-ratio")
		b.ReportMetric(benchload.Micros(cpu[1])/float64(max(done[1], 1)), "door-cpu-µs/req")
		if len(sides) > 2 {
			b.ReportMetric(float64(done[2])/float64(done[0]), "swap-ratio")
			b.ReportMetric(float64(done[1])/float64(max(done[2], 1)), "door-x-swap")
			b.ReportMetric(benchload.Micros(cpu[2])/float64(max(done[2], 1)), "swap-cpu-µs/req")
		}
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkModelDoorFirstByte: the time from sending a streaming request to
// reading its first event, per side in turn.
func BenchmarkModelDoorFirstByte(b *testing.B) {
	defer reportLoad(b)()
	md := startModelDoors(b, viaFrontDoor)
	sides := md.sides()
	first := func(c *http.Client, url string) time.Duration {
		return benchload.FirstLine(b, func() (*http.Response, error) {
			return c.Post(url, "application/json", strings.NewReader(`{"model":"m","messages":[],"stream":true}`))
		})
	}
	clients := make([]*http.Client, len(sides))
	for i := range sides {
		clients[i] = benchload.Client(b, 1)
	}
	for range b.N {
		took := make([][]time.Duration, len(sides))
		for n := range *modelDoorN/4 + 100 {
			for i, base := range sides {
				d := first(clients[i], base+"/v1/chat/completions")
				if n >= 100 {
					took[i] = append(took[i], d)
				}
			}
		}
		med := benchload.Quantile(took[0], 0.5)
		b.ReportMetric(benchload.Micros(med), "direct-ttfb-µs")
		b.ReportMetric(benchload.Micros(benchload.Quantile(took[1], 0.5)-med), "door-added-ttfb-µs")
		if len(sides) > 2 {
			b.ReportMetric(benchload.Micros(benchload.Quantile(took[2], 0.5)-med), "swap-added-ttfb-µs")
		}
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkModelDoorIdle: each proxy's CPU while no request comes (the
// door asks its one instance for its status every 500 ms; llama-swap has
// its model loaded), over modeldoor.idle after a 5 s settle, and its RSS
// at the end.
func BenchmarkModelDoorIdle(b *testing.B) {
	defer reportLoad(b)()
	md := startModelDoors(b, viaFrontDoor)
	for range b.N {
		time.Sleep(5 * time.Second)
		pids := []int{md.doorPID, md.swapPID}
		names := []string{"door", "swap"}
		c0 := make([]time.Duration, 2)
		for i, pid := range pids {
			if pid != 0 {
				_, c0[i], _ = cpuTime(b, pid)
			}
		}
		time.Sleep(*modelDoorIdle)
		for i, pid := range pids {
			if pid == 0 {
				continue
			}
			_, c1, _ := cpuTime(b, pid)
			b.ReportMetric(100*float64(c1-c0[i])/float64(*modelDoorIdle), names[i]+"-idle-cpu-%")
			b.ReportMetric(float64(memKiB(b, pid, "VmRSS:"))/1024, names[i]+"-rss-MiB")
			b.ReportMetric(float64(memKiB(b, pid, "RssAnon:"))/1024, names[i]+"-rss-anon-MiB")
		}
	}
	b.ReportMetric(0, "ns/op")
}
