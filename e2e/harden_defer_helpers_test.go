package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/internal/redistest"
)

// hardenDeferPolicy is one profile behind a front door with a deferred-task
// queue; the %s after [serve] and [defer] take a test's own keys.
const hardenDeferPolicy = `
name = "dq"
command = ["/usr/bin/python3", %q, %q, "0"]
[watch]
backend  = "sim"
interval = "50ms"
[restart]
backoff      = "100ms"
stop_timeout = "2s"
[serve]
listen   = "%s"
upstream = "http://%s"
hold     = "30s"
%s
[defer]
ack_timeout = "1m"
%s
`

// pyServer is a stdlib model server on 127.0.0.1:argv[1] that answers
// GET (its health check) 200 at once, and POST as doPost says (the body of
// a method of the handler, indented by 8).
func pyServer(doPost string) string {
	return `
import hashlib, http.server, os, sys, time, urllib.parse
port = int(sys.argv[1])
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def do_POST(self):
` + doPost + `
srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), H)
print("listening", flush=True)
srv.serve_forever()
`
}

// deferDoorOptions say how startDeferDoor runs gpuguard.
type deferDoorOptions struct {
	child      string // the child's Python source; "" is slowServer
	serve      string // more [serve] keys
	deferKeys  string // more [defer] keys
	binary     string // "" is the race-detector build
	metrics    bool   // serve /metrics too
	memoryFree bool   // start with memory free (nothing is deferred)
}

// deferDoor is one gpuguard with a front door before a Python child, whose
// sim GPU is full (P2 requests are deferred) unless memoryFree.
type deferDoor struct {
	e       *env
	o       deferDoorOptions
	p       *proc
	pol     string
	base    string // the door's base URL
	simDir  string
	metrics string // the metrics address, "" without
}

func startDeferDoor(t *testing.T, o deferDoorOptions) *deferDoor {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	if o.child == "" {
		o.child = slowServer
	}
	e := newEnv(t)
	door, child := freeLoopbackAddr(t), freeLoopbackAddr(t)
	script := e.path("child.py")
	if err := os.WriteFile(script, []byte(o.child), 0o644); err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(child)
	d := &deferDoor{e: e, o: o, base: "http://" + door, simDir: filepath.Join(e.stateDir, "sim")}
	d.pol = e.policy(fmt.Sprintf(hardenDeferPolicy, script, port, door, child, o.serve, o.deferKeys))
	if o.metrics {
		d.metrics = freeLoopbackAddr(t)
	}
	if !o.memoryFree {
		setSim(t, d.simDir, "other", fullGPU)
	}
	d.start(t)
	t.Cleanup(func() {
		if t.Failed() {
			journal, _ := os.ReadFile(filepath.Join(e.stateDir, "events.jsonl"))
			t.Logf("gpuguard's stderr:\n%s\njournal:\n%s", d.p.stderr.Tail(8000), journal)
		}
	})
	return d
}

// start runs gpuguard (again, on the same state dir) and waits for the
// door to pass requests.
func (d *deferDoor) start(t *testing.T) {
	t.Helper()
	args := []string{"run", "--policy", d.pol}
	if d.metrics != "" {
		args = append(args, "--metrics-addr", d.metrics)
	}
	if d.o.binary != "" {
		d.p = pfStartWith(d.e, d.o.binary, args)
	} else {
		d.p = d.e.start(args)
	}
	waitFor(t, "the door to let requests through", 60*time.Second, func() bool {
		c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
		resp, err := c.Get(d.base + "/gpuguard/v1/status")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// deferP2 sends a P2 POST of body to path until a sample has seen the
// full GPU and it is deferred, and answers its ticket.
func (d *deferDoor) deferP2(t *testing.T, path string, body []byte) string {
	t.Helper()
	var code int
	var b []byte
	waitFor(t, "a P2 request to be deferred", 30*time.Second, func() bool {
		code, _, b = httpDo(t, http.MethodPost, d.base+path, body, "X-GPUGuard-Priority", "P2")
		return code == http.StatusAccepted
	})
	var reply struct {
		Ticket string `json:"ticket"`
	}
	if err := json.Unmarshal(b, &reply); err != nil || len(reply.Ticket) < 32 {
		t.Fatalf("202: %s (%v)", b, err)
	}
	return reply.Ticket
}

// result waits for ticket's stored response and answers it.
func (d *deferDoor) result(t *testing.T, ticket string, within time.Duration) (int, http.Header, []byte) {
	t.Helper()
	var code int
	var hdr http.Header
	var body []byte
	waitFor(t, "the result of "+ticket, within, func() bool {
		code, hdr, body = httpDo(t, http.MethodGet, d.base+"/gpuguard/v1/tasks/"+ticket, nil)
		return code != http.StatusAccepted
	})
	return code, hdr, body
}

// doorStatus answers the door's status path, raw and decoded.
func (d *deferDoor) doorStatus(t *testing.T) ([]byte, http.Header, map[string]any) {
	t.Helper()
	_, hdr, body := httpDo(t, http.MethodGet, d.base+"/gpuguard/v1/status", nil)
	var st map[string]any
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("the status path: %v: %s", err, body)
	}
	return body, hdr, st
}

// memoryFree lets the queue run.
func (d *deferDoor) memoryFree(t *testing.T) { setSim(t, d.simDir, "other", "0") }

// answerText is an HTTP answer as one string, headers and body, to search.
func answerText(hdr http.Header, body []byte) string {
	var b strings.Builder
	for k, vs := range hdr {
		b.WriteString(k + ": " + strings.Join(vs, ", ") + "\n")
	}
	b.Write(body)
	return b.String()
}

// redisDeferKeys are the [defer] keys of a store on a Redis of the test's
// own, for the Redis run of a test that runs on each store.
func redisDeferKeys(t *testing.T) string {
	return fmt.Sprintf("store = %q", redistest.Start(t).URL())
}
