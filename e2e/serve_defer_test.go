package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

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
	d := startDeferDoor(t, deferDoorOptions{})
	e, p, base := d.e, d.p, d.base

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
	d.start(t)
	p = d.p
	if code, _, body := httpDo(t, http.MethodGet, base+reply.StatusURL, nil); code != http.StatusAccepted ||
		!strings.Contains(string(body), `"state":"queued"`) {
		t.Fatalf("status URL after the restart, still short: %d %s", code, body)
	}

	// Memory frees: gpuguard replays it, and keeps the child's answer.
	d.memoryFree(t)
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
