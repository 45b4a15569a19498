package actions

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// memServer runs h in memory as a Caller's transport, so that a test in a
// synctest bubble has no real I/O and its clock moves only with the
// caller's waits. It counts requests by path.
type memServer struct {
	h     http.Handler
	mu    sync.Mutex
	calls map[string]int
}

func (m *memServer) RoundTrip(req *http.Request) (*http.Response, error) {
	m.mu.Lock()
	if m.calls == nil {
		m.calls = map[string]int{}
	}
	m.calls[req.URL.Path]++
	m.mu.Unlock()
	rec := httptest.NewRecorder()
	m.h.ServeHTTP(rec, req)
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	return rec.Result(), nil
}

func (m *memServer) count(path string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls[path]
}

// TestAccept: a status listed in accept is a success, like a 2xx; any
// other non-2xx is still a failure.
func TestAccept(t *testing.T) {
	srv := &memServer{h: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"message":"model is already running"}}`, http.StatusBadRequest)
	})}
	c := newCaller(srv)
	for _, tt := range []struct {
		name   string
		accept []int
		ok     bool
	}{
		{"accepted", []int{400}, true},
		{"among others", []int{404, 400}, true},
		{"not listed", []int{404}, false},
		{"none", nil, false},
	} {
		o := c.Do(context.Background(), Request{Method: "POST", URL: "http://router/models/load", Accept: tt.accept, Timeout: time.Minute})
		if o.OK() != tt.ok || o.Status != 400 {
			t.Errorf("%s: outcome %+v, want ok %v with status 400", tt.name, o, tt.ok)
		}
		if !tt.ok && (o.Err == nil || !strings.Contains(o.Err.Error(), "answered 400")) {
			t.Errorf("%s: error %v, want one naming the 400", tt.name, o.Err)
		}
	}
}

// TestUntilPollsUntilDone: after the call, the until path is polled at
// once and then every 250 ms until its status and body say done; the
// outcome's time counts the wait.
func TestUntilPollsUntilDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		// The model's process exits a second after the unload's answer:
		// /props says 200 while it runs, then 400 "not loaded".
		srv := &memServer{h: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case r.URL.Path == "/models/unload":
				w.Write([]byte(`{"success":true}`))
			case r.URL.RawQuery != "model=tiny&autoload=false":
				http.Error(w, "bad query "+r.URL.RawQuery, http.StatusTeapot)
			case time.Since(start) < time.Second:
				w.Write([]byte(`{"model":"tiny"}`))
			default:
				http.Error(w, `{"error":{"message":"model is not loaded"}}`, http.StatusBadRequest)
			}
		})}
		o := newCaller(srv).Do(context.Background(), Request{Method: "POST", URL: "http://router/models/unload", Timeout: time.Minute,
			Until: Until{URL: "http://router/props?model=tiny&autoload=false", Status: []int{400}, Body: "not loaded", Timeout: time.Minute}})
		if !o.OK() || o.Status != 200 {
			t.Fatalf("outcome %+v, want the unload's 200, OK", o)
		}
		if o.Took != time.Second {
			t.Errorf("took %s, want 1s: done at the first poll after the process left", o.Took)
		}
		if n := srv.count("/props"); n != 5 {
			t.Errorf("%d polls, want 5 (at 0, 250, 500, 750 ms and 1 s)", n)
		}
	})
}

// TestUntilBody: a status in the list is not enough while the body lacks
// the text asked for.
func TestUntilBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		srv := &memServer{h: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/is_sleeping" {
				w.Write([]byte(`{"is_sleeping":` + map[bool]string{false: "false", true: "true"}[time.Since(start) >= 500*time.Millisecond] + `}`))
			}
		})}
		o := newCaller(srv).Do(context.Background(), Request{Method: "POST", URL: "http://vllm/sleep?level=1",
			Until: Until{URL: "http://vllm/is_sleeping", Status: []int{200}, Body: `"is_sleeping":true`, Timeout: time.Minute}})
		if !o.OK() || o.Took != 500*time.Millisecond {
			t.Errorf("outcome %+v, want OK after 500ms", o)
		}
	})
}

// TestUntilTimeout: an until not met within its timeout fails the action,
// naming the path, the timeout and the last answer; the call's own status
// is kept.
func TestUntilTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &memServer{h: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/props" {
				http.Error(w, `{"error":{"message":"Loading model"}}`, http.StatusServiceUnavailable)
			}
		})}
		o := newCaller(srv).Do(context.Background(), Request{Method: "POST", URL: "http://router/models/load",
			Until: Until{URL: "http://router/props?model=tiny", Status: []int{200}, Timeout: 2 * time.Second}})
		if o.OK() || o.Status != 200 || o.Took != 2*time.Second {
			t.Fatalf("outcome %+v, want a failure after 2s with the call's 200", o)
		}
		for _, want := range []string{"until GET http://router/props?model=tiny", "not done within 2s", "last answer: 503"} {
			if !strings.Contains(o.Err.Error(), want) {
				t.Errorf("error %q lacks %q", o.Err, want)
			}
		}
	})
}

// TestUntilNotAfterAFailure: a failed call is not followed by polls.
func TestUntilNotAfterAFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &memServer{h: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "no", http.StatusInternalServerError)
		})}
		o := newCaller(srv).Do(context.Background(), Request{Method: "POST", URL: "http://s/unload",
			Until: Until{URL: "http://s/ps", Status: []int{200}, Timeout: time.Minute}})
		if o.OK() || o.Status != 500 || srv.count("/ps") != 0 {
			t.Errorf("outcome %+v with %d polls, want the 500 and none", o, srv.count("/ps"))
		}
	})
}

// TestUntilHungPoll: a poll with no answer is given up after 5 s and the
// next one is sent, rather than waiting out the whole timeout.
func TestUntilHungPoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var polls int
		srv := &memServer{h: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/ps" {
				return
			}
			polls++ // one poll at a time: the caller waits for each
			if polls == 1 {
				<-r.Context().Done()
			}
		})}
		o := newCaller(srv).Do(context.Background(), Request{Method: "POST", URL: "http://s/unload",
			Until: Until{URL: "http://s/ps", Status: []int{200}, Timeout: time.Minute}})
		if !o.OK() || o.Took != maxPollWait || polls != 2 {
			t.Errorf("outcome %+v after %d polls, want OK at %s after 2", o, polls, maxPollWait)
		}
	})
}

// TestUntilCancelled: a wait ends when its context does (the child
// exited, gpuguard stops), saying so.
func TestUntilCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &memServer{h: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/ps" {
				http.Error(w, "busy", http.StatusServiceUnavailable)
			}
		})}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		o := newCaller(srv).Do(ctx, Request{Method: "POST", URL: "http://s/unload",
			Until: Until{URL: "http://s/ps", Status: []int{200}, Timeout: time.Minute}})
		if o.OK() || !errors.Is(o.Err, context.DeadlineExceeded) || o.Took != 3*time.Second {
			t.Errorf("outcome %+v, want the context's end after 3s", o)
		}
	})
}

// TestUntilOverTheNetwork: the until's GET goes out over a real connection
// with its query, through New's transport.
func TestUntilOverTheNetwork(t *testing.T) {
	var mu sync.Mutex
	loaded := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch r.URL.Path {
		case "/models/load":
			loaded = true
			w.Write([]byte(`{"success":true}`))
		case "/props":
			if !loaded || r.URL.Query().Get("model") != "tiny" {
				http.Error(w, "not loaded", http.StatusBadRequest)
				return
			}
			w.Write([]byte(`{"model_path":"tiny.gguf"}`))
		}
	}))
	defer srv.Close()
	o := New().Do(context.Background(), Request{Method: "POST", URL: srv.URL + "/models/load", Timeout: time.Minute,
		Until: Until{URL: srv.URL + "/props?model=tiny&autoload=false", Status: []int{200}, Body: "tiny.gguf", Timeout: time.Minute}})
	if !o.OK() {
		t.Fatalf("outcome %+v, want OK", o)
	}
}
