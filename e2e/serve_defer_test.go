package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// deferPolicy is one profile behind a front door, with the deferred-task
// queue in the state dir (the default store).
const deferPolicy = `
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
[defer]
ack_timeout = "1m"
`

// httpDo sends one request and answers its status, headers and body.
func httpDo(t *testing.T, method, url string, body []byte, hdr ...string) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, bytes.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// TestDoorDeferredRequest: with the real binary and a real HTTP child, a
// P2 request while memory is short gets 202 with a ticket; gpuguard is
// SIGKILLed and run again with the same state dir, and the request is
// still queued; once memory frees gpuguard replays it to the child, and
// its status URL answers the child's response.
func TestDoorDeferredRequest(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	e := newEnv(t)
	door, child := freeLoopbackAddr(t), freeLoopbackAddr(t)
	script := e.path("slow_server.py")
	if err := os.WriteFile(script, []byte(slowServer), 0o644); err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(child)
	pol := e.policy(fmt.Sprintf(deferPolicy, script, port, door, child))
	simDir := filepath.Join(e.stateDir, "sim")
	setSim(t, simDir, "other", "16106127360") // above high: memory is short
	base := "http://" + door
	start := func() *proc {
		p := e.start([]string{"run", "--policy", pol})
		p.expect("listening")
		waitFor(t, "the door to let requests through", 30*time.Second, func() bool {
			code, _, _ := httpDo(t, http.MethodGet, base+"/gpuguard/v1/status", nil)
			return code == http.StatusOK
		})
		return p
	}
	p := start()

	// Once a sample has seen the full GPU, P2 is deferred.
	var code int
	var hdr http.Header
	var body []byte
	waitFor(t, "a P2 request to be deferred", 30*time.Second, func() bool {
		code, hdr, body = httpDo(t, http.MethodPost, base+"/v1/completions?n=1", []byte("hello"), "X-GPUGuard-Priority", "P2")
		return code == http.StatusAccepted
	})
	var reply struct {
		Ticket    string `json:"ticket"`
		StatusURL string `json:"status_url"`
	}
	if err := json.Unmarshal(body, &reply); err != nil || len(reply.Ticket) < 32 ||
		reply.StatusURL != "/gpuguard/v1/tasks/"+reply.Ticket || hdr.Get("Location") != reply.StatusURL {
		t.Fatalf("202: %s (%v), Location %q", body, err, hdr.Get("Location"))
	}
	if code, _, body := httpDo(t, http.MethodGet, base+reply.StatusURL, nil); code != http.StatusAccepted ||
		strings.TrimSpace(string(body)) != `{"state":"queued","attempts":0}` {
		t.Fatalf("status URL while short: %d %s", code, body)
	}
	if code, _, _ := httpDo(t, http.MethodGet, base+"/gpuguard/v1/tasks/t-unknown", nil); code != http.StatusNotFound {
		t.Fatalf("an unknown ticket: %d, want 404", code)
	}

	// A restart in between loses nothing.
	p.signal(syscall.SIGKILL)
	p.wait()
	if tk := taskByTicket(e.tasksJSON("dq"), reply.Ticket); tk == nil || tk["state"] != "queued" || tk["tool"] != "http" {
		t.Fatalf("after SIGKILL: task %v, want it queued, tool http", tk)
	}
	p = start()
	if code, _, body := httpDo(t, http.MethodGet, base+reply.StatusURL, nil); code != http.StatusAccepted ||
		!strings.Contains(string(body), `"state":"queued"`) {
		t.Fatalf("status URL after the restart, still short: %d %s", code, body)
	}

	// Memory frees: gpuguard replays it, and keeps the child's answer.
	setSim(t, simDir, "other", "0")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("stderr:\n%s\njournal:\n%s", p.stderr.String(), e.read(filepath.Join(e.stateDir, "events.jsonl")))
		}
	})
	waitFor(t, "the deferred request's result", 30*time.Second, func() bool {
		code, hdr, body = httpDo(t, http.MethodGet, base+reply.StatusURL, nil)
		return code != http.StatusAccepted
	})
	if code != http.StatusOK || strings.TrimSpace(string(body)) != `{"profile": "default", "echo": 5}` ||
		hdr.Get("X-GPUGuard-Ticket") != reply.Ticket || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("the stored response: %d %v %s", code, hdr, body)
	}
	if tk := taskByTicket(e.tasksJSON("dq"), reply.Ticket); tk == nil || tk["state"] != "done" {
		t.Fatalf("after the replay: task %v, want done", tk)
	}
	if n := len(events(e, "task_done")); n != 1 {
		t.Errorf("%d task_done events, want 1", n)
	}
	p.signal(syscall.SIGTERM)
	p.wait()
}
