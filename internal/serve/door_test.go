package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestPassing: method, path, query, body and headers reach the child; hop-
// by-hop headers do not; X-Forwarded-For gets the client's address
// appended; the answer carries the profile headers.
func TestPassing(t *testing.T) {
	type seen struct {
		method, uri, body, xff, conn, te, custom string
	}
	got := make(chan seen, 1)
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.RequestURI, string(b), r.Header.Get("X-Forwarded-For"),
			r.Header.Get("Connection"), r.Header.Get("Te"), r.Header.Get("X-Custom")}
		w.Header().Set("X-From-Child", "yes")
		w.WriteHeader(201)
		fmt.Fprint(w, "made")
	})
	fd := startDoor(t, Config{Upstream: up.URL, Hold: time.Minute, MaxHeld: 10})
	fd.Profile("int8", 1, 3)
	fd.launch(t, 1)
	req, _ := http.NewRequest(http.MethodPost, fd.url+"/v1/completions?stream=false", strings.NewReader(`{"prompt":"hi"}`))
	req.Header.Set("X-Forwarded-For", "10.0.0.1")
	req.Header.Set("Connection", "X-Custom-Hop")
	req.Header.Set("X-Custom", "kept")
	resp, err := newClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	s := <-got
	if s.method != "POST" || s.uri != "/v1/completions?stream=false" || s.body != `{"prompt":"hi"}` {
		t.Errorf("child saw %+v", s)
	}
	if s.xff != "10.0.0.1, 127.0.0.1" {
		t.Errorf("X-Forwarded-For %q, want the client's appended", s.xff)
	}
	if s.conn != "" || s.custom != "kept" {
		t.Errorf("hop-by-hop: Connection %q X-Custom %q", s.conn, s.custom)
	}
	if resp.StatusCode != 201 || string(body) != "made" || resp.Header.Get("X-From-Child") != "yes" {
		t.Errorf("answer %d %q %v", resp.StatusCode, body, resp.Header)
	}
	if resp.Header.Get(HeaderProfile) != "int8" || resp.Header.Get(HeaderLevel) != "1" {
		t.Errorf("profile headers %q %q", resp.Header.Get(HeaderProfile), resp.Header.Get(HeaderLevel))
	}
}

// TestHoldExpiry: a request held past hold gets 503 with Retry-After and
// the OpenAI-shaped body, with the profile headers; one with a body too
// (the gate then waits on its connection, watching its client).
func TestHoldExpiry(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {})
	fd := startDoor(t, Config{Upstream: up.URL, Hold: 200 * time.Millisecond, MaxHeld: 10})
	fd.Profile("fp16", 0, 2)
	for i, body := range []string{"", `{"prompt":"hi"}`} {
		start := time.Now()
		resp, got := do1(t, newClient(t), http.MethodPost, fd.url+"/v1/completions", body) // never launched: never ready
		if took := time.Since(start); took < 200*time.Millisecond {
			t.Errorf("body %q: answered after %s, before hold", body, took)
		}
		checkUnavailable(t, resp, got)
		if fd.meter.rejects("hold") != i+1 {
			t.Errorf("rejected{hold} = %d", fd.meter.rejects("hold"))
		}
	}
}

func checkUnavailable(t *testing.T, resp *http.Response, body string) {
	t.Helper()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || resp.Header.Get("Retry-After") == "0" {
		t.Fatalf("status %d Retry-After %q, want 503 with Retry-After >= 1", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	var e errorBody
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Type != "gpuguard_unavailable" || e.Error.Code != 503 || e.Error.Message == "" {
		t.Fatalf("body %q (%v), want the OpenAI-shaped error", body, err)
	}
	if resp.Header.Get(HeaderProfile) == "" || resp.Header.Get(HeaderLevel) == "" {
		t.Errorf("a 503 of the door lacks the profile headers: %v", resp.Header)
	}
	if resp.ContentLength != int64(len(body)) {
		t.Errorf("a 503 of the door has Content-Length %d for %d bytes (chunked?)", resp.ContentLength, len(body))
	}
}

// TestMaxHeld: with max_held waiting, one more gets 503 at once; the held
// ones go through, in order, once the child is ready.
func TestMaxHeld(t *testing.T) {
	var mu sync.Mutex
	var order []string
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		order = append(order, r.URL.Path)
		mu.Unlock()
	})
	fd := startDoor(t, Config{Upstream: up.URL, Hold: time.Minute, MaxHeld: 3})
	fd.Profile("fp16", 0, 2)
	c := newClient(t)
	var wg sync.WaitGroup
	codes := make([]int, 3)
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, _ := get(t, c, fmt.Sprintf("%s/r%d", fd.url, i))
			codes[i] = resp.StatusCode
		}()
		fd.waitHeld(t, i+1) // arrival order is the order they are sent in
	}
	start := time.Now()
	resp, body := get(t, c, fd.url+"/one-more")
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the one over max_held waited %s", took)
	}
	checkUnavailable(t, resp, body)
	if fd.meter.rejects("full") != 1 {
		t.Errorf("rejected{full} = %d", fd.meter.rejects("full"))
	}
	fd.launch(t, 1)
	wg.Wait()
	for i, c := range codes {
		if c != 200 {
			t.Errorf("held request %d: %d", i, c)
		}
	}
	if fd.Held() != 0 {
		t.Errorf("held %d after ready", fd.Held())
	}
	if len(order) != 3 {
		t.Errorf("child saw %v", order)
	}
}

// TestHeldClientLeaves: a client that disconnects while held frees its
// place at once.
func TestHeldClientLeaves(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {})
	fd := startDoor(t, Config{Upstream: up.URL, Hold: time.Minute, MaxHeld: 1})
	ctx, cancel := context.WithCancel(t.Context())
	c := newClient(t)
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fd.url+"/a", nil)
		_, err := c.Do(req)
		errc <- err
	}()
	fd.waitHeld(t, 1)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("client: %v", err)
	}
	fd.waitHeld(t, 0)
	// The place is free: another request is held, not refused as full.
	go func() {
		resp, _ := get(t, c, fd.url+"/b")
		errc <- fmt.Errorf("status %d", resp.StatusCode)
	}()
	fd.waitHeld(t, 1)
	fd.launch(t, 1)
	if err := <-errc; err.Error() != "status 200" {
		t.Fatal(err)
	}
}

// TestDrain: a drain holds new requests and reports when the ones in
// flight have finished; none fails.
func TestDrain(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			started <- struct{}{}
			<-release
		}
		fmt.Fprint(w, "ok")
	})
	fd := startDoor(t, Config{Upstream: up.URL, Hold: time.Minute, MaxHeld: 10})
	fd.launch(t, 1)
	c := newClient(t)
	slow := make(chan int, 1)
	go func() {
		resp, _ := get(t, c, fd.url+"/slow")
		slow <- resp.StatusCode
	}()
	<-started
	drained := fd.Drain()
	select {
	case <-drained:
		t.Fatal("drained with a request in flight")
	default:
	}
	held := make(chan int, 1)
	go func() {
		resp, _ := get(t, c, fd.url+"/new")
		held <- resp.StatusCode
	}()
	fd.waitHeld(t, 1)
	close(release)
	<-drained
	if code := <-slow; code != 200 {
		t.Errorf("in-flight request: %d", code)
	}
	fd.launch(t, 2) // the restarted child
	if code := <-held; code != 200 {
		t.Errorf("held request: %d", code)
	}
}

// TestRetryDropped: a request whose connection to the child failed
// before any answer byte is held and sent once more to the next ready
// child when the child cannot have read it (it failed while the body was
// still being written) or it may run twice (an idempotent method, an
// Idempotency-Key). A POST the child read whole before it dropped the
// connection is not sent twice: 503 with Retry-After. A body the door
// read more than maxReplay of cannot be sent again: 502.
func TestRetryDropped(t *testing.T) {
	big := strings.Repeat("b", 3<<20) // more than the sockets hold: the child drops it mid-way
	huge := strings.Repeat("h", maxReplay+1<<20)
	for _, c := range []struct {
		name, method, body string
		hdr                []string
		cut                int // > 0: the child drops it having read that many bytes, not all
		code, calls        int
		retries            int64
	}{
		{"post-read-whole", http.MethodPost, `{"n":1}`, nil, 0, 503, 1, 0},
		{"post-cut-short", http.MethodPost, big, nil, 10, 200, 2, 1},
		{"post-cut-past-replay", http.MethodPost, huge, nil, maxReplay + 1, 502, 1, 0},
		{"post-idempotency-key", http.MethodPost, `{"n":1}`, []string{"Idempotency-Key", "k1"}, 0, 200, 2, 1},
		{"put", http.MethodPut, `{"n":1}`, nil, 0, 200, 2, 1},
		{"delete", http.MethodDelete, "", nil, 0, 200, 2, 1},
		{"get", http.MethodGet, "", nil, 0, 200, 2, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			var bodies []string
			up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				first := len(bodies) == 0
				mu.Unlock()
				var b []byte
				if first && c.cut > 0 {
					b = make([]byte, c.cut)
					_, _ = io.ReadFull(r.Body, b)
				} else {
					b, _ = io.ReadAll(r.Body)
				}
				mu.Lock()
				bodies = append(bodies, string(b))
				mu.Unlock()
				if first { // die before answering a byte
					panic(http.ErrAbortHandler)
				}
				fmt.Fprint(w, "second time")
			})
			fd := startDoor(t, Config{Upstream: up.URL, Hold: time.Minute, MaxHeld: 10, Retry: true})
			fd.Profile("fp16", 0, 2)
			fd.launch(t, 1)
			req, _ := http.NewRequest(c.method, fd.url+"/v1/chat", strings.NewReader(c.body))
			for i := 0; i+1 < len(c.hdr); i += 2 {
				req.Header.Set(c.hdr[i], c.hdr[i+1])
			}
			resp, err := newClient(t).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			switch {
			case resp.StatusCode != c.code:
				t.Fatalf("%d %q, want %d", resp.StatusCode, b, c.code)
			case c.code == 503:
				checkUnavailable(t, resp, string(b))
			case c.code == 502:
				if !strings.Contains(string(b), "gpuguard_upstream_error") {
					t.Errorf("%q, want the door's 502", b)
				}
			case string(b) != "second time":
				t.Fatalf("%q, want the second answer", b)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(bodies) != c.calls || c.calls == 2 && bodies[1] != c.body {
				t.Errorf("the child got %d requests (the last %d bytes), want %d, the last whole", len(bodies), len(bodies[len(bodies)-1]), c.calls)
			}
			if got := fd.meter.retries.Load(); got != c.retries {
				t.Errorf("retries %d, want %d", got, c.retries)
			}
		})
	}
}

// TestNoRetryWhenOff: retry = false passes the failure on (502).
func TestNoRetryWhenOff(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) { panic(http.ErrAbortHandler) })
	fd := startDoor(t, Config{Upstream: up.URL, Hold: time.Minute, MaxHeld: 10})
	fd.launch(t, 1)
	resp, _ := get(t, newClient(t), fd.url+"/x")
	if resp.StatusCode != 502 {
		t.Fatalf("status %d, want 502", resp.StatusCode)
	}
}

// TestBegunNotRepeated: when the child dies mid-answer the client's
// connection is closed and the request is not sent again.
func TestBegunNotRepeated(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		mu.Unlock()
		w.Header().Set("Content-Length", "100")
		fmt.Fprint(w, "partial")
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	})
	fd := startDoor(t, Config{Upstream: up.URL, Hold: time.Minute, MaxHeld: 10, Retry: true})
	fd.launch(t, 1)
	resp, err := newClient(t).Get(fd.url + "/x")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil {
		t.Fatalf("read the whole body %q without an error; want the connection closed", b)
	}
	if string(b) != "partial" {
		t.Errorf("got %q before the close", b)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 1 {
		t.Errorf("the child got the request %d times", calls)
	}
	if fd.meter.retries.Load() != 0 {
		t.Errorf("retries %d", fd.meter.retries.Load())
	}
}

// TestStreaming: an answer of 50 chunks sent 20 ms apart reaches the
// client as 50 separate chunks, each before the next is sent: the child
// sends chunk i+1 only once the client has read chunk i, so a door that
// buffered any part of the answer would stall it. So for an SSE stream,
// for a chunked answer of another type (Ollama's NDJSON), and for one of
// known length whose body trickles in: the door's proxy has no flush
// timer, and each kind reaches the client write by write all the same.
// The first chunk's lag behind its sending is bounded too (the figure
// itself, +0.2 ms, is BenchmarkDoorFirstByte's).
func TestStreaming(t *testing.T) {
	const chunks = 50
	chunk := func(i int) string { return fmt.Sprintf("data: token %d\n\n", i) }
	total := 0
	for i := range chunks {
		total += len(chunk(i))
	}
	for _, c := range []struct{ name, typ, length string }{
		{"sse", "text/event-stream", ""},
		{"ndjson", "application/x-ndjson", ""},
		{"known-length", "application/json", strconv.Itoa(total)},
	} {
		t.Run(c.name, func(t *testing.T) {
			sent := make(chan time.Time, 1)
			read := make(chan struct{})
			up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", c.typ)
				if c.length != "" {
					w.Header().Set("Content-Length", c.length)
				}
				tick := time.NewTicker(20 * time.Millisecond)
				defer tick.Stop()
				for i := range chunks {
					fmt.Fprint(w, chunk(i))
					w.(http.Flusher).Flush()
					sent <- time.Now()
					select {
					case <-read:
					case <-time.After(10 * time.Second):
						t.Errorf("chunk %d never reached the client: the answer is buffered", i)
						return
					}
					<-tick.C
				}
			})
			fd := startDoor(t, Config{Upstream: up.URL, Hold: time.Minute, MaxHeld: 10})
			fd.launch(t, 1)
			resp, err := newClient(t).Get(fd.url + "/v1/completions")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if got := resp.Header.Get("Content-Length"); got != c.length {
				t.Errorf("Content-Length %q, want %q", got, c.length)
			}
			br := bufio.NewReader(resp.Body)
			n := 0
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					break
				}
				if !strings.HasPrefix(line, "data: ") {
					continue
				}
				at := <-sent
				if lag := time.Since(at); n == 0 && lag > 50*time.Millisecond {
					t.Errorf("the first chunk reached the client %s after it was sent", lag)
				}
				n++
				read <- struct{}{}
			}
			if n != chunks {
				t.Fatalf("got %d chunks, want %d", n, chunks)
			}
		})
	}
}

// TestConcurrentBodies: many requests at once, each with a body of its
// own larger than one copy buffer, each get their own body back from an
// echoing child: the pooled copy buffers and the kept bodies (retry on)
// are never shared between requests.
func TestConcurrentBodies(t *testing.T) {
	const clients, size = 32, 100 << 10
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body) // all of it first: HTTP/1 is not full duplex
		if err != nil {
			t.Error(err)
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(body)
	})
	fd := startDoor(t, Config{Upstream: up.URL, Hold: time.Minute, MaxHeld: 10, Retry: true})
	fd.launch(t, 1)
	c := newClient(t)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := bytes.Repeat([]byte{byte('a' + i%26), byte(i)}, size/2)
			resp, err := c.Post(fd.url+"/echo", "application/octet-stream", bytes.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			got, err := io.ReadAll(resp.Body)
			if err != nil || !bytes.Equal(got, body) {
				t.Errorf("client %d: got %d bytes (%v), not its own %d", i, len(got), err, len(body))
			}
		}()
	}
	wg.Wait()
}

// TestFallback: P1 goes to the fallback only while memory is short; P0
// and P2 go to the child.
func TestFallback(t *testing.T) {
	child := upstream(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "gpu") })
	cpu := upstream(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "cpu") })
	fd := startDoor(t, Config{Upstream: child.URL, Hold: time.Minute, MaxHeld: 10, Fallback: cpu.URL})
	fd.Profile("fp16", 0, 2)
	fd.launch(t, 1)
	c := newClient(t)
	for _, tt := range []struct {
		short      bool
		prio, want string
	}{
		{false, "P1", "gpu"}, {true, "P1", "cpu"}, {true, "p1", "cpu"}, {true, "P0", "gpu"}, {true, "", "gpu"},
		{true, "P2", "gpu"}, // no deferred-task queue: held like P0
		{false, "P1", "gpu"},
	} {
		fd.Short(tt.short)
		resp, body := get(t, c, fd.url+"/x", HeaderPriority, tt.prio)
		if body != tt.want {
			t.Errorf("short=%v %s: answered by %s, want %s", tt.short, tt.prio, body, tt.want)
		}
		if tt.want == "cpu" && (resp.Header.Get(HeaderFallback) != "1" || resp.Header.Get(HeaderLevel) != "2") {
			t.Errorf("fallback answer headers %v", resp.Header)
		}
	}
	resp, _ := get(t, c, fd.url+"/x", HeaderPriority, "P9")
	if resp.StatusCode != 400 {
		t.Errorf("bad priority: %d", resp.StatusCode)
	}
}

// TestStatusPath: 200 with the status object when ready, 503 with the same
// body when not; other /gpuguard/ paths are not passed.
func TestStatusPath(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) { t.Errorf("child got %s", r.URL) })
	fd := startDoor(t, Config{Upstream: up.URL, Hold: time.Minute, MaxHeld: 10})
	c := newClient(t)
	check := func(code int, ready bool) {
		t.Helper()
		resp, body := get(t, c, fd.url+StatusPath)
		var st struct {
			Name  string `json:"name"`
			Ready bool   `json:"ready"`
		}
		if err := json.Unmarshal([]byte(body), &st); err != nil || resp.StatusCode != code || st.Ready != ready || st.Name != "llama" {
			t.Fatalf("status %d %q, want %d ready=%v", resp.StatusCode, body, code, ready)
		}
		if strings.Contains(body, "hf_secret") || !strings.Contains(body, `"last_event":{`) {
			t.Fatalf("status %q: want the last event without the child's stderr", body)
		}
	}
	check(503, false)
	fd.launch(t, 1)
	check(200, true)
	fd.Unready()
	check(503, false)
	if resp, _ := get(t, c, fd.url+"/gpuguard/v1/nothing"); resp.StatusCode != 404 {
		t.Errorf("unknown gpuguard path: %d", resp.StatusCode)
	}
}

// TestShutdownAnswersHeld: closing the door answers held requests 503 at
// once, with a body or without.
func TestShutdownAnswersHeld(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {})
	fd := New(Config{Upstream: up.URL, Health: "/health", Hold: time.Minute, MaxHeld: 10, Priority: P0}, Options{})
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- fd.Serve(ln) }()
	got := make(chan *http.Response, 2)
	c := newClient(t)
	for _, body := range []string{"", "with a body"} {
		go func() {
			resp, err := c.Post("http://"+ln.Addr().String()+"/x", "text/plain", strings.NewReader(body))
			if err != nil {
				t.Error(err)
				got <- nil
				return
			}
			resp.Body.Close()
			got <- resp
		}()
	}
	for fd.Held() != 2 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := fd.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if resp := <-got; resp == nil || resp.StatusCode != 503 {
			t.Fatalf("held request at shutdown: %v", resp)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestListenInUse names the address.
func TestListenInUse(t *testing.T) {
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = Listen(ln.Addr().String())
	if err == nil || !strings.Contains(err.Error(), ln.Addr().String()) {
		t.Fatalf("second listen: %v", err)
	}
}
