package serve

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// connLog is what an upstream saw of its connections: the client ends of
// those that carried a request other than /health (the door's hop; the
// health checks open their own), and a channel closed when each closes.
type connLog struct {
	mu     sync.Mutex
	used   []string
	closed map[string]chan struct{}
}

func (l *connLog) saw(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, a := range l.used {
		if a == addr {
			return
		}
	}
	l.used = append(l.used, addr)
}

func (l *connLog) addr(i int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.used[i]
}

// conns is how many connections carried requests.
func (l *connLog) conns() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.used)
}

func (l *connLog) closedCh(addr string) chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.closed[addr]
	if !ok {
		c = make(chan struct{})
		l.closed[addr] = c
	}
	return c
}

// trackedUpstream is upstream with a connLog.
func trackedUpstream(t *testing.T, h http.HandlerFunc) (*httptest.Server, *connLog) {
	t.Helper()
	l := &connLog{closed: map[string]chan struct{}{}}
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			return
		}
		l.saw(r.RemoteAddr)
		h(w, r)
	}))
	s.Config.ConnState = func(c net.Conn, st http.ConnState) {
		if st == http.StateClosed || st == http.StateHijacked {
			close(l.closedCh(c.RemoteAddr().String()))
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s, l
}

func hopKey(t *testing.T, raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return hostPort(u)
}

func do1(t *testing.T, c *http.Client, method, url, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, url, rd)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b)
}

// TestHopKeepAlive: sequential requests, with and without bodies, go to
// the child over one kept connection.
func TestHopKeepAlive(t *testing.T) {
	up, log := trackedUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s", r.Method, b)
	})
	fd := startDoor(t, Config{Upstream: up.URL, Hold: time.Minute, MaxHeld: 10, Retry: true})
	fd.launch(t, 1)
	c := newClient(t)
	for i := range 20 {
		method, body := http.MethodGet, ""
		if i%2 == 1 {
			method, body = http.MethodPost, fmt.Sprintf(`{"n":%d}`, i)
		}
		if code, got := do1(t, c, method, fd.url+"/v1/x", body); code != 200 || got != method+" "+body {
			t.Fatalf("request %d: %d %q", i, code, got)
		}
	}
	if n := log.conns(); n != 1 {
		t.Errorf("the child got the requests on %d connections, want 1", n)
	}
	if n := fd.hop.idleLen(hopKey(t, up.URL)); n != 1 {
		t.Errorf("%d idle connections kept, want 1", n)
	}
}

// TestHopIdleClosedByChild: the child closes the kept connection while
// it is idle (its own idle timeout, a restart); the next requests go on a
// new one and are answered, each reaching the child once, with no door
// retry.
func TestHopIdleClosedByChild(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	up, log := trackedUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, r.Method+" "+string(b))
		mu.Unlock()
		fmt.Fprint(w, "ok")
	})
	fd := startDoor(t, Config{Upstream: up.URL, Hold: time.Minute, MaxHeld: 10, Retry: true})
	fd.launch(t, 1)
	c := newClient(t)
	for i, method := range []string{http.MethodGet, http.MethodGet, http.MethodPost} {
		body := ""
		if method == http.MethodPost {
			body = "p"
		}
		if code, got := do1(t, c, method, fd.url+"/v1/x", body); code != 200 || got != "ok" {
			t.Fatalf("request %d: %d %q", i, code, got)
		}
		up.CloseClientConnections()
		<-log.closedCh(log.addr(i))
	}
	if n := log.conns(); n != 3 {
		t.Errorf("%d connections carried requests, want 3 (one per request)", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"GET ", "GET ", "POST p"}; fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("the child saw %q, want %q", seen, want)
	}
	// The hop saw the close before it wrote (a peek at the idle
	// connection), so even the POST went on a new connection without a
	// door retry (which would close the gate until a health check).
	if r := fd.meter.retries.Load(); r != 0 {
		t.Errorf("%d door retries", r)
	}
}

// TestHopDroppedOnKeptConn: the child takes a request on a kept
// connection and drops it before answering a byte. An idempotent request
// is sent again on a new connection by the hop itself, as http.Transport
// does (no door retry); a POST surfaces to the door's retry rules: sent
// once more with retry on (one retry counted), 502 with retry off.
func TestHopDroppedOnKeptConn(t *testing.T) {
	for _, c := range []struct {
		name, method string
		retry        bool
		code         int
		calls        int
		retries      int64
	}{
		{"get", http.MethodGet, true, 200, 3, 0},
		{"get-retry-off", http.MethodGet, false, 200, 3, 0},
		{"post", http.MethodPost, true, 200, 3, 1},
		{"post-retry-off", http.MethodPost, false, 502, 2, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			calls := 0
			up, log := trackedUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.ReadAll(r.Body)
				mu.Lock()
				calls++
				n := calls
				mu.Unlock()
				if n == 2 {
					panic(http.ErrAbortHandler) // the kept connection's second request
				}
				fmt.Fprint(w, "answer")
			})
			fd := startDoor(t, Config{Upstream: up.URL, Hold: time.Minute, MaxHeld: 10, Retry: c.retry})
			fd.launch(t, 1)
			cl := newClient(t)
			if code, _ := do1(t, cl, http.MethodGet, fd.url+"/v1/x", ""); code != 200 {
				t.Fatalf("first request: %d", code)
			}
			body := ""
			if c.method == http.MethodPost {
				body = `{"n":2}`
			}
			code, got := do1(t, cl, c.method, fd.url+"/v1/x", body)
			if code != c.code || (code == 200 && got != "answer") {
				t.Errorf("second request: %d %q, want %d", code, got, c.code)
			}
			mu.Lock()
			defer mu.Unlock()
			if calls != c.calls {
				t.Errorf("the child got %d requests, want %d", calls, c.calls)
			}
			if r := fd.meter.retries.Load(); r != c.retries {
				t.Errorf("door retries %d, want %d", r, c.retries)
			}
			if c.code == 200 && log.conns() != 2 {
				t.Errorf("%d connections carried requests, want 2", log.conns())
			}
		})
	}
}

// TestHopRequestClose: a request that asks to close its connection says
// so to the child and leaves nothing kept; the next one is kept.
func TestHopRequestClose(t *testing.T) {
	up, _ := trackedUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "close=%v", r.Close)
	})
	hop := newHopTransport(newTransport())
	t.Cleanup(hop.CloseIdleConnections)
	key := hopKey(t, up.URL)
	for _, k := range []struct {
		close bool
		kept  int
	}{{true, 0}, {false, 1}} {
		req, _ := http.NewRequest("GET", up.URL+"/x", nil)
		req.Close = k.close
		resp, err := hop.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != fmt.Sprintf("close=%v", k.close) {
			t.Errorf("the child saw %q", b)
		}
		if n := hop.idleLen(key); n != k.kept {
			t.Errorf("close %v: %d kept, want %d", k.close, n, k.kept)
		}
	}
}

// TestHopUpgrade: a protocol upgrade (101, as websockets) passes through
// the door both ways.
func TestHopUpgrade(t *testing.T) {
	up, _ := trackedUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "x-echo" {
			http.Error(w, "no upgrade", 400)
			return
		}
		conn, bw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		_, _ = bw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: x-echo\r\n\r\n")
		_ = bw.Flush()
		line, err := bw.ReadString('\n')
		if err != nil {
			return
		}
		_, _ = bw.WriteString("echo " + line)
		_ = bw.Flush()
	})
	fd := startDoor(t, Config{Upstream: up.URL, Hold: time.Minute, MaxHeld: 10})
	fd.launch(t, 1)
	conn, err := net.Dial("tcp", strings.TrimPrefix(fd.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "GET /ws HTTP/1.1\r\nHost: door\r\nConnection: Upgrade\r\nUpgrade: x-echo\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 101 {
		t.Fatalf("status %d, want 101", resp.StatusCode)
	}
	fmt.Fprint(conn, "ping\n")
	line, err := br.ReadString('\n')
	if err != nil || line != "echo ping\n" {
		t.Fatalf("%q %v, want the echo", line, err)
	}
}

// TestHopCloseIdle: the door's Close closes its kept connections to the
// child.
func TestHopCloseIdle(t *testing.T) {
	up, log := trackedUpstream(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	var addr string
	// Cleanups run last first: this one after the door's Close.
	t.Cleanup(func() {
		select {
		case <-log.closedCh(addr):
		case <-time.After(5 * time.Second):
			t.Error("the kept connection outlived the door's Close")
		}
	})
	fd := startDoor(t, Config{Upstream: up.URL, Hold: time.Minute, MaxHeld: 10})
	fd.launch(t, 1)
	if code, _ := do1(t, newClient(t), "GET", fd.url+"/x", ""); code != 200 {
		t.Fatalf("status %d", code)
	}
	if fd.hop.idleLen(hopKey(t, up.URL)) != 1 {
		t.Fatal("no kept connection")
	}
	addr = log.addr(0)
}

// TestCanonicalHeaderNames: stamp's header keys are the canonical forms
// of the exported names, as Header.Set would key them.
func TestCanonicalHeaderNames(t *testing.T) {
	for name, key := range map[string]string{HeaderProfile: canonProfile, HeaderLevel: canonLevel, HeaderFallback: canonFallback} {
		if got := http.CanonicalHeaderKey(name); got != key {
			t.Errorf("%s is keyed %q, not %q", name, got, key)
		}
	}
}

// TestHopPoolLimits: the pool keeps at most maxIdle connections per
// host:port, and closes one idle for idleTimeout.
func TestHopPoolLimits(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 2)
	up, log := trackedUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/wait" {
			arrived <- struct{}{}
			<-release
		}
		fmt.Fprint(w, "ok")
	})
	hop := newHopTransport(newTransport())
	hop.maxIdle, hop.idleTimeout = 1, time.Hour
	t.Cleanup(hop.CloseIdleConnections)
	get := func(path string) error {
		req, _ := http.NewRequest("GET", up.URL+path, nil)
		resp, err := hop.RoundTrip(req)
		if err != nil {
			return err
		}
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		return err
	}
	errc := make(chan error, 2)
	for range 2 { // two at once: two connections
		go func() { errc <- get("/wait") }()
	}
	<-arrived
	<-arrived
	close(release)
	for range 2 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	key := hopKey(t, up.URL)
	if n := hop.idleLen(key); n != 1 {
		t.Fatalf("%d kept, want maxIdle 1", n)
	}
	if log.conns() != 2 {
		t.Fatalf("%d connections, want 2", log.conns())
	}
	hop.idleTimeout = 10 * time.Millisecond
	if err := get("/x"); err != nil { // kept again, now with the short timeout
		t.Fatal(err)
	}
	for i := range 2 {
		select {
		case <-log.closedCh(log.addr(i)):
		case <-time.After(5 * time.Second):
			t.Fatalf("connection %d was never closed (idle timeout)", i)
		}
	}
	if n := hop.idleLen(key); n != 0 {
		t.Errorf("%d kept after the idle timeout", n)
	}
}

// countingTripper counts the requests it passes to a stdlib Transport.
type countingTripper struct {
	tr *http.Transport
	mu sync.Mutex
	k  int
}

func (c *countingTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.k++
	c.mu.Unlock()
	return c.tr.RoundTrip(r)
}

// TestInjectedTransport: an Options.Transport carries every request as
// it is; the door builds no hop of its own then.
func TestInjectedTransport(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	ct := &countingTripper{tr: &http.Transport{}}
	t.Cleanup(ct.tr.CloseIdleConnections)
	d := New(Config{Upstream: up.URL, Health: "/health", Hold: time.Minute, MaxHeld: 10, Priority: P0},
		Options{Transport: ct, Check: func(context.Context, string) error { return nil }})
	if d.hop != nil {
		t.Fatal("the door built a hop beside the injected transport")
	}
	healthy := make(chan int, 1)
	d.up.onHealthy = func(gen int) { healthy <- gen }
	d.Launched(1)
	<-healthy
	rec := httptest.NewRecorder()
	d.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/x", nil))
	if rec.Code != 200 || rec.Body.String() != "ok" {
		t.Fatalf("%d %q", rec.Code, rec.Body.String())
	}
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if ct.k != 1 {
		t.Errorf("the injected transport carried %d requests, want 1", ct.k)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = d.Close(ctx)
}
