package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// slowServer is a stand-in model server (stdlib only): it "loads" for
// argv[2] seconds before it listens on 127.0.0.1:argv[1], as vLLM and TGI
// do (nothing listens while loading), answers GET /health with 200, and
// every other request after 30 ms with its profile, in one write. GET
// /oom (sent to its own port, not through the door) dies with a CUDA OOM
// message while other requests are in flight. SIGTERM ends it at once:
// the door has drained it by then.
const slowServer = `
import http.server, json, os, signal, sys, time
port, load = int(sys.argv[1]), float(sys.argv[2])
profile = os.environ["GPUGUARD_PROFILE"]
signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
print("loading", profile, flush=True)
time.sleep(load)

class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Buffered: each answer leaves in one write when the request is done,
    # so a child that dies (GET /oom) leaves every other answer whole or
    # not begun, as the door's retry needs. Unbuffered, its head and body
    # would go in two writes, and a death between them would cut an answer.
    wbufsize = -1
    def log_message(self, *a):
        pass
    def reply(self, code, body):
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_GET(self):
        if self.path == "/health":
            return self.reply(200, b"")
        if self.path == "/oom":
            sys.stderr.write("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
            sys.stderr.flush()
            os._exit(1)
        time.sleep(0.03)
        self.reply(200, json.dumps({"profile": profile}).encode())
    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n)
        time.sleep(0.03)
        self.reply(200, json.dumps({"profile": profile, "echo": len(body)}).encode())

srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), H)
srv.daemon_threads = True
print("listening", profile, flush=True)
srv.serve_forever()
`

// doorPolicy is a ladder of three live = false profiles (every step is a
// restart, as for vLLM) behind a front door.
const doorPolicy = `
name = "door"
[watch]
backend  = "sim"
interval = "100ms"
[watermark]
high    = 0.90
critical = 0.99
low     = 0.50
sustain = "300ms"
grace   = "3s"
[restart]
backoff      = "100ms"
stop_timeout = "10s"
release_timeout = "1s"
[serve]
listen   = "%s"
upstream = "http://%s"
hold     = "60s"
%s
[[profile]]
name = "fp16"
[[profile]]
name = "int8"
[[profile]]
name = "int4"
`

// doorRun is one gpuguard with a front door around slowServer.
type doorRun struct {
	e         *env
	p         *proc
	door      string // the door's address
	child     string // the child's own address
	policy    string
	extra     string
	load      *clientLoad
	metricsAt string
}

func startDoorRun(t *testing.T, extra string, env ...string) *doorRun {
	t.Helper()
	return startDoorRunLoad(t, extra, false, env...)
}

// startDoorRunLoad is startDoorRun whose load's requests carry an
// Idempotency-Key when keyed: the door may send them again after the
// child read them and died.
func startDoorRunLoad(t *testing.T, extra string, keyed bool, env ...string) *doorRun {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	e := newEnv(t)
	d := &doorRun{e: e, door: freeLoopbackAddr(t), child: freeLoopbackAddr(t), extra: extra, metricsAt: freeLoopbackAddr(t)}
	script := e.path("slow_server.py")
	if err := os.WriteFile(script, []byte(slowServer), 0o644); err != nil {
		t.Fatal(err)
	}
	d.policy = e.policy(fmt.Sprintf(doorPolicy, d.door, d.child, extra))
	_, port, _ := net.SplitHostPort(d.child)
	d.p = e.start([]string{"run", "--policy", d.policy, "--metrics-addr", d.metricsAt, "--",
		"/usr/bin/python3", script, port, "2"}, env...)
	// The door listens before the child starts: from here no request
	// may fail.
	waitFor(t, "the front door to listen", 30*time.Second, func() bool {
		c, err := net.Dial("tcp", d.door)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	d.load = newLoad(t, "http://"+d.door, 4, keyed)
	return d
}

// readyEvents counts the journal's ready events.
func (d *doorRun) readyEvents() int { return len(events(d.e, "ready")) }

// waitReady waits for the n-th ready event (the n-th child's first
// healthy answer).
func (d *doorRun) waitReady(t *testing.T, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("ready event %d", n), 60*time.Second, func() bool { return d.readyEvents() >= n })
}

// finish stops the load, checks that no request failed and that enough
// were sent, then stops gpuguard.
func (d *doorRun) finish(t *testing.T, minRequests int) *loadResult {
	t.Helper()
	r := d.load.stop()
	t.Logf("%d requests, %d failed; profiles seen %v", r.ok+len(r.failures), len(r.failures), r.profiles)
	if len(r.failures) > 0 {
		t.Errorf("%d of %d requests failed, first: %v; stderr:\n%s", len(r.failures), r.ok+len(r.failures), r.failures[0], d.p.stderr.String())
	}
	if r.ok < minRequests {
		t.Errorf("only %d requests succeeded, want at least %d", r.ok, minRequests)
	}
	d.p.signal(sigterm)
	if code := d.p.wait(); code != 0 {
		t.Errorf("gpuguard exit %d; stderr:\n%s", code, d.p.stderr.String())
	}
	return r
}

// clientLoad is steady client traffic through the door: workers sending
// requests back to back, each with a small JSON body.
type clientLoad struct {
	stopc chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	res   loadResult
}

type loadResult struct {
	ok       int
	failures []string
	profiles map[string]int // X-GPUGuard-Profile of the answers
}

func startLoad(t *testing.T, base string, workers int) *clientLoad {
	return newLoad(t, base, workers, false)
}

// newLoad is startLoad whose requests carry an Idempotency-Key of their
// own when keyed.
func newLoad(t *testing.T, base string, workers int, keyed bool) *clientLoad {
	l := &clientLoad{stopc: make(chan struct{}), res: loadResult{profiles: map[string]int{}}}
	tr := &http.Transport{MaxIdleConnsPerHost: workers}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr, Timeout: 90 * time.Second}
	for w := range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-l.stopc:
					return
				default:
				}
				req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/v1/completions?w=%d&i=%d", base, w, i),
					strings.NewReader(`{"model":"m","prompt":"hello","max_tokens":8}`))
				req.Header.Set("Content-Type", "application/json")
				if keyed {
					req.Header.Set("Idempotency-Key", fmt.Sprintf("w%d-%d", w, i))
				}
				resp, err := client.Do(req)
				if err != nil {
					l.fail(err.Error())
					continue
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				switch {
				case err != nil:
					l.fail("reading the answer: " + err.Error())
				case resp.StatusCode != 200:
					l.fail(fmt.Sprintf("status %d: %s", resp.StatusCode, body))
				case resp.Header.Get("X-GPUGuard-Profile") == "" || resp.Header.Get("X-GPUGuard-Level") == "":
					l.fail("an answer without the profile headers")
				default:
					l.mu.Lock()
					l.res.ok++
					l.res.profiles[resp.Header.Get("X-GPUGuard-Profile")]++
					l.mu.Unlock()
				}
			}
		}()
	}
	return l
}

func (l *clientLoad) fail(s string) {
	l.mu.Lock()
	l.res.failures = append(l.res.failures, s)
	l.mu.Unlock()
}

// count is how many requests succeeded so far.
func (l *clientLoad) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.res.ok
}

func (l *clientLoad) stop() *loadResult {
	close(l.stopc)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.res
	return &r
}

// moreRequests waits until n more requests have succeeded: the load has
// run on the new child for a while.
func (d *doorRun) moreRequests(t *testing.T, n int) {
	t.Helper()
	target := d.load.count() + n
	waitFor(t, fmt.Sprintf("%d more answered requests", n), 60*time.Second, func() bool { return d.load.count() >= target })
}
