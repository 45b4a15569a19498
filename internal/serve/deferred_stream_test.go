package serve

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// postPiped sends a P2 POST whose body the caller writes to the answered
// pipe; the response comes on the channel.
func postPiped(t *testing.T, c *http.Client, url string) (*io.PipeWriter, <-chan *http.Response) {
	t.Helper()
	pr, pw := io.Pipe()
	req, _ := http.NewRequest(http.MethodPost, url, pr)
	req.Header.Set(HeaderPriority, P2)
	out := make(chan *http.Response, 1)
	go func() {
		resp, err := c.Do(req)
		if err != nil {
			t.Errorf("POST %s: %v", url, err)
			close(out)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		out <- resp
	}()
	return pw, out
}

// TestDeferralsCountTowardMaxHeld: while their bodies are written to the
// store, deferrals count as held: with max_held of them, one more request
// that would wait, deferred or held, gets 503 at once (reason full); once
// they are stored, the places are free again.
func TestDeferralsCountTowardMaxHeld(t *testing.T) {
	child := upstream(t, func(w http.ResponseWriter, r *http.Request) { t.Error("the child saw a request") })
	q := newMemQueue()
	fd := startDoorQueue(t, Config{Upstream: child.URL, Hold: time.Minute, MaxHeld: 2}, q)
	fd.Short(true) // and never launched: a P0 request would wait
	c := newClient(t)
	var pipes []*io.PipeWriter
	var answers []<-chan *http.Response
	for range 2 {
		pw, out := postPiped(t, c, fd.url+"/v1/x")
		if _, err := pw.Write([]byte("first bytes")); err != nil {
			t.Fatal(err)
		}
		pipes, answers = append(pipes, pw), append(answers, out)
	}
	fd.waitHeld(t, 2)
	for _, prio := range []string{P2, P0} {
		resp, body := do(t, c, http.MethodPost, fd.url+"/v1/x", []byte("x"), HeaderPriority, prio)
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" ||
			!strings.Contains(string(body), "too many requests") {
			t.Errorf("%s past max_held: %d %s", prio, resp.StatusCode, body)
		}
	}
	if n := fd.meter.rejects("full"); n != 2 {
		t.Errorf("%d rejected full, want 2", n)
	}
	for i, pw := range pipes {
		pw.Close()
		if resp := <-answers[i]; resp == nil || resp.StatusCode != http.StatusAccepted {
			t.Fatalf("deferral %d: %v", i, resp)
		}
	}
	fd.waitHeld(t, 0)
	if len(q.tasks) != 2 {
		t.Fatalf("%d tasks stored, want 2", len(q.tasks))
	}
}

// TestDeferredBodyStreamed: the queue reads a deferral's body while the
// client still sends it (it is never read whole first); one past 16 MiB
// without a Content-Length is cut off at the limit and answered 413.
func TestDeferredBodyStreamed(t *testing.T) {
	child := upstream(t, func(w http.ResponseWriter, r *http.Request) {})
	q := newMemQueue()
	firstBytes := make(chan string, 1)
	q.reading = func(r io.Reader) ([]byte, error) {
		b := make([]byte, 5)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		firstBytes <- string(b)
		rest, err := io.ReadAll(r)
		return append(b, rest...), err
	}
	fd := startDoorQueue(t, Config{Upstream: child.URL, Hold: time.Minute, MaxHeld: 10}, q)
	fd.launch(t, 1)
	fd.Short(true)
	c := newClient(t)
	pw, out := postPiped(t, c, fd.url+"/v1/x")
	pw.Write([]byte("hello"))
	select {
	case got := <-firstBytes:
		if got != "hello" {
			t.Fatalf("the queue read %q first", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the queue did not get the body before the client had sent it all")
	}
	pw.Write([]byte(" world"))
	pw.Close()
	if resp := <-out; resp == nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("deferral: %v", resp)
	}
	if b := q.bodies[q.only(t).Ticket]; string(b) != "hello world" {
		t.Fatalf("stored body %q", b)
	}

	q.reading = nil
	pw, out = postPiped(t, c, fd.url+"/v1/x") // chunked: no Content-Length
	go func() {
		chunk := make([]byte, 1<<20)
		for range 17 {
			if _, err := pw.Write(chunk); err != nil {
				return
			}
		}
		pw.Close()
	}()
	if resp := <-out; resp == nil || resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("17 MiB chunked: %v, want 413", resp)
	}
	if len(q.tasks) != 1 {
		t.Fatalf("%d tasks stored, want the first alone", len(q.tasks))
	}
}

// TestDeferredStoredBeforeBodiesApart: a task stored with its body in its
// payload, and a result with its body in it (as gpuguard stored them
// before bodies were kept apart), are replayed and answered as they were.
func TestDeferredStoredBeforeBodiesApart(t *testing.T) {
	seen := make(chan string, 1)
	child := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seen <- fmt.Sprintf("%s %s len=%d", r.Method, b, r.ContentLength)
		fmt.Fprint(w, "new answer")
	})
	q := newMemQueue()
	fd := startDoorQueue(t, Config{Upstream: child.URL, Hold: time.Minute, MaxHeld: 10}, q)
	fd.launch(t, 1)
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	q.mu.Lock()
	q.tasks["t-old"] = api.Task{Ticket: "t-old", Tool: "http", State: api.TaskQueued,
		Payload: json.RawMessage(`{"method":"POST","path":"/v1/x","body":"` + b64("old body") + `"}`)}
	q.tasks["t-done"] = api.Task{Ticket: "t-done", Tool: "http", State: api.TaskDone}
	q.results["t-done"] = []byte(`{"status":200,"header":{"Content-Type":["text/plain"]},"body":"` + b64("old answer") + `"}`)
	q.mu.Unlock()
	if err := q.replay(t, fd, "t-old"); err != nil {
		t.Fatal(err)
	}
	if got := <-seen; got != "POST old body len=8" {
		t.Errorf("the child saw %q", got)
	}
	resp, body := get(t, newClient(t), fd.url+TasksPath+"t-done")
	if resp.StatusCode != http.StatusOK || body != "old answer" || resp.ContentLength != 10 {
		t.Errorf("an old result: %d %q (Content-Length %d)", resp.StatusCode, body, resp.ContentLength)
	}
}

// TestReplayAnswer: a replay's answer is read as it comes, at most 16 MiB
// of it; until it is closed the replay counts in flight, so a drain waits
// for it.
func TestReplayAnswer(t *testing.T) {
	var size atomic.Int64
	size.Store(maxDeferred)
	child := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Write(bytes.Repeat([]byte("a"), int(size.Load())))
	})
	fd := startDoorQueue(t, Config{Upstream: child.URL, Hold: time.Minute, MaxHeld: 10}, newMemQueue())
	fd.launch(t, 1)
	payload := json.RawMessage(`{"method":"GET","path":"/x"}`)
	_, answer, err := fd.Replay(context.Background(), payload, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	drained := fd.Drain()
	n, err := io.Copy(io.Discard, answer)
	if err != nil || n != maxDeferred {
		t.Fatalf("16 MiB: %d bytes, %v", n, err)
	}
	select {
	case <-drained:
		t.Fatal("the drain ended before the replay's answer was closed")
	default:
	}
	answer.Close()
	select {
	case <-drained:
	case <-time.After(10 * time.Second):
		t.Fatal("the drain did not end once the answer was closed")
	}

	size.Store(maxDeferred + 1)
	fd.launch(t, 2)
	_, answer, err = fd.Replay(context.Background(), payload, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer answer.Close()
	if _, err := io.Copy(io.Discard, answer); err == nil || !strings.Contains(err.Error(), "over") {
		t.Fatalf("16 MiB and a byte: %v, want an error", err)
	}
}
