package serve

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// connLog is what an upstream saw of its connections: the client ends of
// those that carried a request other than /health (the door's transport;
// the health checks open their own), and a channel closed when each
// closes.
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

// do1 is do with the bodies as strings; "" sends none.
func do1(t *testing.T, c *http.Client, method, url, body string, hdr ...string) (*http.Response, string) {
	t.Helper()
	resp, b := do(t, c, method, url, []byte(body), hdr...)
	return resp, string(b)
}

// TestTransportSettings: the transport to the child keeps connections
// for many concurrent clients, takes no proxy from the environment,
// leaves bodies as they are, and drops an idle connection before the
// usual servers' 5 s keep-alive timeout does.
func TestTransportSettings(t *testing.T) {
	tr := newTransport()
	if tr.Proxy != nil || !tr.DisableCompression || tr.MaxIdleConnsPerHost < 64 || tr.ResponseHeaderTimeout != 0 ||
		tr.IdleConnTimeout <= 0 || tr.IdleConnTimeout >= 5*time.Second {
		t.Errorf("transport %+v", tr)
	}
}

// TestChildKeepAlive: sequential requests, with and without bodies, go to
// the child over one kept connection.
func TestChildKeepAlive(t *testing.T) {
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
		if resp, got := do1(t, c, method, fd.url+"/v1/x", body); resp.StatusCode != 200 || got != method+" "+body {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, got)
		}
	}
	if n := log.conns(); n != 1 {
		t.Errorf("the child got the requests on %d connections, want 1", n)
	}
}

// TestChildClosesIdle: the child closes the kept connection while it is
// idle (its own idle timeout, a restart); the next requests go on a new
// one and are answered, each reaching the child once, with no door
// retry.
func TestChildClosesIdle(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	up, log := trackedUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		mu.Unlock()
		fmt.Fprint(w, "ok")
	})
	fd := startDoor(t, Config{Upstream: up.URL, Hold: time.Minute, MaxHeld: 10, Retry: true})
	fd.launch(t, 1)
	c := newClient(t)
	for i := range 3 {
		if resp, got := do1(t, c, http.MethodGet, fd.url+"/v1/x", ""); resp.StatusCode != 200 || got != "ok" {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, got)
		}
		up.CloseClientConnections()
		<-log.closedCh(log.addr(i))
	}
	if n := log.conns(); n != 3 {
		t.Errorf("%d connections carried requests, want 3 (one per request)", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 3 {
		t.Errorf("the child got %d requests, want 3", calls)
	}
	if r := fd.meter.retries.Load(); r != 0 {
		t.Errorf("%d door retries", r)
	}
}

// TestDroppedOnKeptConn: the child takes a request on a kept connection,
// reads it whole and drops it before answering a byte. A GET, or a POST
// with an Idempotency-Key, is sent again on a new connection by
// net/http's transport itself (no door retry); a POST without one may
// not run twice: 503 with retry on, 502 with it off.
func TestDroppedOnKeptConn(t *testing.T) {
	for _, c := range []struct {
		name, method string
		key          bool
		retry        bool
		code         int
		calls        int
	}{
		{"get", http.MethodGet, false, true, 200, 3},
		{"get-retry-off", http.MethodGet, false, false, 200, 3},
		{"post-key", http.MethodPost, true, true, 200, 3},
		{"post", http.MethodPost, false, true, 503, 2},
		{"post-retry-off", http.MethodPost, false, false, 502, 2},
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
			fd.Profile("fp16", 0, 2)
			fd.launch(t, 1)
			cl := newClient(t)
			if resp, _ := do1(t, cl, http.MethodGet, fd.url+"/v1/x", ""); resp.StatusCode != 200 {
				t.Fatalf("first request: %d", resp.StatusCode)
			}
			body, hdr := "", []string(nil)
			if c.method == http.MethodPost {
				body = `{"n":2}`
			}
			if c.key {
				hdr = []string{"Idempotency-Key", "k2"}
			}
			resp, got := do1(t, cl, c.method, fd.url+"/v1/x", body, hdr...)
			if resp.StatusCode != c.code || (c.code == 200 && got != "answer") {
				t.Errorf("second request: %d %q, want %d", resp.StatusCode, got, c.code)
			}
			if c.code == 503 {
				checkUnavailable(t, resp, got)
			}
			mu.Lock()
			defer mu.Unlock()
			if calls != c.calls {
				t.Errorf("the child got %d requests, want %d", calls, c.calls)
			}
			if r := fd.meter.retries.Load(); r != 0 {
				t.Errorf("door retries %d, want 0", r)
			}
			if c.code == 200 && log.conns() != 2 {
				t.Errorf("%d connections carried requests, want 2", log.conns())
			}
		})
	}
}

// TestUpgrade: a protocol upgrade (101, as websockets) passes through the
// door both ways, lines and all: the client's connection is a plain pipe
// after it.
func TestUpgrade(t *testing.T) {
	up, _ := trackedUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "x-echo" {
			http.Error(w, "no upgrade", 400)
			return
		}
		conn, bw := hijackWrite(t, w, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: x-echo\r\n\r\n")
		if conn == nil {
			return
		}
		defer conn.Close()
		for {
			line, err := bw.ReadString('\n')
			if err != nil {
				return
			}
			_, _ = bw.WriteString("echo " + line)
			_ = bw.Flush()
		}
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
	// Lines that would be a head, with framing the door refuses in one.
	for _, l := range []string{"ping\n", "Content-Length: 5\n", "Transfer-Encoding: chunked\n", "\r\n"} {
		fmt.Fprint(conn, l)
		line, err := br.ReadString('\n')
		if err != nil || line != "echo "+l {
			t.Fatalf("%q %v, want the echo of %q", line, err, l)
		}
	}
}

// TestCloseIdle: the door's Close closes its kept connections to the
// child.
func TestCloseIdle(t *testing.T) {
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
	if resp, _ := do1(t, newClient(t), "GET", fd.url+"/x", ""); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
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
// it is; the door builds no transport of its own then.
func TestInjectedTransport(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	ct := &countingTripper{tr: &http.Transport{}}
	t.Cleanup(ct.tr.CloseIdleConnections)
	d := New(Config{Upstream: up.URL, Health: "/health", Hold: time.Minute, MaxHeld: 10, Priority: P0},
		Options{Transport: ct, Check: func(context.Context, string) error { return nil }})
	if d.std != nil {
		t.Fatal("the door built a transport beside the injected one")
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
