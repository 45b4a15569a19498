package serve

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gpuguard/gpuguard/api"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testMeter counts what the door reports.
type testMeter struct {
	mu       sync.Mutex
	codes    map[int]int
	holds    int
	retries  atomic.Int64
	rejected map[string]int
}

func newTestMeter() *testMeter {
	return &testMeter{codes: map[int]int{}, rejected: map[string]int{}}
}
func (m *testMeter) ServeRequest(code int) { m.mu.Lock(); m.codes[code]++; m.mu.Unlock() }
func (m *testMeter) ServeHold(time.Duration) {
	m.mu.Lock()
	m.holds++
	m.mu.Unlock()
}
func (m *testMeter) ServeRetry() { m.retries.Add(1) }
func (m *testMeter) ServeRejected(r string) {
	m.mu.Lock()
	m.rejected[r]++
	m.mu.Unlock()
}
func (m *testMeter) rejects(r string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rejected[r]
}

// frontDoor is a door serving on a loopback port in front of upstream.
type frontDoor struct {
	*Door
	url     string
	meter   *testMeter
	healthy chan int
	// requested gets OnRequest's held of each request.
	requested chan bool
}

func startDoor(t *testing.T, cfg Config) *frontDoor {
	t.Helper()
	return startDoorQueue(t, cfg, nil)
}

// startDoorQueue is startDoor with a deferred-task queue (nil: none).
func startDoorQueue(t *testing.T, cfg Config, q Queue) *frontDoor {
	t.Helper()
	if cfg.Health == "" {
		cfg.Health = "/health"
	}
	if cfg.Priority == "" {
		cfg.Priority = P0
	}
	fd := &frontDoor{meter: newTestMeter(), healthy: make(chan int, 16), requested: make(chan bool, 64)}
	fd.Door = New(cfg, Options{
		Status: func() api.Status {
			// The last event carries the dead child's stderr, which the
			// door's status path must not show (TestStatusPath).
			return api.Status{Name: "llama", State: "running",
				LastEvent: &api.Event{Event: api.EventExit, Stderr: []string{"HF_TOKEN=hf_secret"}}}
		},
		OnHealthy: func(gen int) { fd.healthy <- gen },
		OnRequest: func(held bool) {
			select {
			case fd.requested <- held:
			default:
			}
		},
		Meter: fd.meter,
		Queue: q,
		Logf:  t.Logf,
	})
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fd.url = "http://" + ln.Addr().String()
	done := make(chan error, 1)
	go func() { done <- fd.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := fd.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return fd
}

// launch tells the door a child started and waits for its first healthy
// answer.
func (fd *frontDoor) launch(t *testing.T, gen int) {
	t.Helper()
	fd.Launched(gen)
	select {
	case g := <-fd.healthy:
		if g != gen {
			t.Fatalf("healthy gen %d, want %d", g, gen)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the door never saw the child healthy")
	}
}

// waitHeld waits until n requests are held.
func (fd *frontDoor) waitHeld(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for fd.Held() != n {
		if time.Now().After(deadline) {
			t.Fatalf("held %d, want %d", fd.Held(), n)
		}
		time.Sleep(time.Millisecond) // polling the count itself, not a guess at timing
	}
}

// upstream is a stand-in model server with a /health that answers 200.
func upstream(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("/", h)
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// client never pools connections across tests (goleak).
func newClient(t *testing.T) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func get(t *testing.T, c *http.Client, url string, hdr ...string) (*http.Response, string) {
	t.Helper()
	resp, b := do(t, c, http.MethodGet, url, nil, hdr...)
	return resp, string(b)
}

// do sends a request with body (none when empty) and headers given as
// name, value pairs, and answers the response with its body read.
func do(t *testing.T, c *http.Client, method, url string, body []byte, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, bytes.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, b
}

// hijackWrite takes the stand-in server's connection from net/http and
// writes raw on it, bytes net/http would not write itself; conn (nil
// after a failure, reported) is the caller's to close.
func hijackWrite(t *testing.T, w http.ResponseWriter, raw string) (net.Conn, *bufio.ReadWriter) {
	t.Helper()
	conn, bw, err := w.(http.Hijacker).Hijack()
	if err != nil {
		t.Error(err)
		return nil, nil
	}
	_, _ = bw.WriteString(raw)
	_ = bw.Flush()
	return conn, bw
}

// freePort is a loopback address nothing listens on (refused).
func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
