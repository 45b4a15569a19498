package serve

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// healthChild is a child's health endpoint that counts the connections
// its checks came on, answers code, and tells each check on checked.
type healthChild struct {
	srv     *httptest.Server
	mu      sync.Mutex
	conns   int
	code    int
	checked chan struct{}
}

func newHealthChild(t *testing.T) *healthChild {
	c := &healthChild{code: http.StatusOK, checked: make(chan struct{}, 16)}
	c.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		code := c.code
		c.mu.Unlock()
		w.WriteHeader(code)
		c.checked <- struct{}{}
	}))
	c.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			c.mu.Lock()
			c.conns++
			c.mu.Unlock()
		}
	}
	c.srv.Start()
	t.Cleanup(c.srv.Close)
	return c
}

func (c *healthChild) answer(code int) {
	c.mu.Lock()
	c.code = code
	c.mu.Unlock()
}

func (c *healthChild) connections() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conns
}

// TestHealthCheckKeepsItsConnection: the checks of a child that answers
// share one connection; once it is dropped (dropConnection), the next
// check dials afresh.
func TestHealthCheckKeepsItsConnection(t *testing.T) {
	child := newHealthChild(t)
	hc := &http.Client{Transport: newHealthTransport(), Timeout: pollTimeout}
	defer hc.CloseIdleConnections()
	check := httpCheck(hc)
	url := child.srv.URL + "/health"
	for i := range 5 {
		if err := check(context.Background(), url); err != nil {
			t.Fatalf("check %d: %v", i, err)
		}
	}
	if n := child.connections(); n != 1 {
		t.Fatalf("5 checks of a child that answers came on %d connections, want 1", n)
	}
	u := &readiness{fresh: hc.CloseIdleConnections}
	u.dropConnection()
	if err := check(context.Background(), url); err != nil {
		t.Fatal(err)
	}
	if n := child.connections(); n != 2 {
		t.Fatalf("the check after the connection was dropped came on an old one (%d in all), want a new one", n)
	}
}

// TestHealthDropsItsConnection: the checks that can make a child unready
// dial afresh: the kept connection is dropped after a failed check, when
// a request suspects the child, and at each launch and stop.
func TestHealthDropsItsConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		ok := true
		d := New(Config{Upstream: "http://child", Health: "/health", Priority: P0}, Options{
			Check: func(context.Context, string) error {
				mu.Lock()
				defer mu.Unlock()
				if !ok {
					return errors.New("refused")
				}
				return nil
			},
		})
		drops := 0
		d.up.fresh = func() { drops++ }
		step := func(what string, want int, do func()) {
			t.Helper()
			before := drops
			do()
			synctest.Wait()
			if got := drops - before; got != want {
				t.Fatalf("%s: the connection dropped %d times, want %d", what, got, want)
			}
		}
		step("a launch", 1, func() { d.Launched(1) })
		step("two checks that pass", 0, func() { time.Sleep(2 * pollReady) })
		step("a check that fails", 1, func() {
			mu.Lock()
			ok = false
			mu.Unlock()
			time.Sleep(pollReady)
		})
		mu.Lock()
		ok = true
		mu.Unlock()
		time.Sleep(pollReady)
		synctest.Wait()
		step("a suspect", 1, func() { d.up.suspect(1) })
		step("a stop", 1, func() { d.Unready() })
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = d.Close(ctx)
	})
}

// TestSuspectDialsAfresh: a request that found the child's connection
// failing asks for a check now, and that check dials afresh.
func TestSuspectDialsAfresh(t *testing.T) {
	child := newHealthChild(t)
	healthy := make(chan int, 1)
	d := New(Config{Upstream: child.srv.URL, Health: "/health", Priority: P0}, Options{OnHealthy: func(gen int) { healthy <- gen }})
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = d.Close(ctx)
	}()
	d.Launched(1)
	<-healthy
	<-child.checked
	d.up.suspect(1)
	<-child.checked
	if n := child.connections(); n != 2 {
		t.Fatalf("the check a suspect asked for came on %d connection(s) in all, want a second one", n)
	}
}

// TestHealthCheckSurvivesAnIdleClose: a child that drops the kept
// connection as the next check arrives on it (its own idle timeout racing
// the check) fails no check: net/http sends the GET again on a new
// connection (docs/serving.md, Readiness).
func TestHealthCheckSurvivesAnIdleClose(t *testing.T) {
	var mu sync.Mutex
	checks := map[string]int{} // the checks each connection carried
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		checks[r.RemoteAddr]++
		again := checks[r.RemoteAddr] > 1
		mu.Unlock()
		if again {
			panic(http.ErrAbortHandler) // the kept connection, closed as the check came
		}
	}))
	t.Cleanup(srv.Close)
	hc := &http.Client{Transport: newHealthTransport(), Timeout: pollTimeout}
	defer hc.CloseIdleConnections()
	check := httpCheck(hc)
	for i := range 3 {
		if err := check(context.Background(), srv.URL+"/health"); err != nil {
			t.Fatalf("check %d: %v", i, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	sent := 0
	for _, n := range checks {
		sent += n
	}
	if len(checks) != 3 || sent != 5 {
		t.Errorf("3 checks were sent %d times on %d connections, want 5 on 3: each after the first met its kept connection closed and went again on a new one", sent, len(checks))
	}
}
