package serve

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestHopRequestBodies: bodies of known length, of unknown length
// (chunked), empty, none, and one sent with Expect: 100-continue, each
// reach the child whole, with the framing the client chose.
func TestHopRequestBodies(t *testing.T) {
	up, _ := trackedUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("reading the body: %v", err)
		}
		fmt.Fprintf(w, "len=%d te=%v expect=%q body=%s", r.ContentLength, r.TransferEncoding, r.Header.Get("Expect"), b)
	})
	fd := startDoor(t, Config{Upstream: up.URL, Hold: time.Minute, MaxHeld: 10, Retry: true})
	fd.launch(t, 1)
	tr := &http.Transport{ExpectContinueTimeout: 5 * time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr}
	big := strings.Repeat("b", maxInlineBody+1)
	for _, k := range []struct {
		name   string
		method string
		body   func() io.Reader
		expect bool
		want   string
	}{
		{"length", http.MethodPost, func() io.Reader { return strings.NewReader("hello") }, false, "len=5 te=[] expect=\"\" body=hello"},
		{"chunked", http.MethodPost, func() io.Reader { return io.MultiReader(strings.NewReader("hel"), strings.NewReader("lo")) }, false,
			"len=-1 te=[chunked] expect=\"\" body=hello"},
		{"empty", http.MethodPost, func() io.Reader { return strings.NewReader("") }, false, "len=0 te=[] expect=\"\" body="},
		{"none", http.MethodGet, func() io.Reader { return nil }, false, "len=0 te=[] expect=\"\" body="},
		{"100-continue", http.MethodPut, func() io.Reader { return strings.NewReader("hello") }, true,
			"len=5 te=[] expect=\"100-continue\" body=hello"},
		{"over-inline", http.MethodPost, func() io.Reader { return strings.NewReader(big) }, false,
			fmt.Sprintf("len=%d te=[] expect=\"\" body=%s", len(big), big)},
	} {
		t.Run(k.name, func(t *testing.T) {
			req, _ := http.NewRequest(k.method, fd.url+"/v1/x", k.body())
			if k.expect {
				req.Header.Set("Expect", "100-continue")
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(b) != k.want {
				t.Errorf("%d %.80q, want %.80q", resp.StatusCode, b, k.want)
			}
		})
	}
}

// TestHopResponses: each kind of answer reaches the client whole, and
// the connection is kept only when the answer ended where its framing
// said and neither side asked to close: known length, chunked, HEAD,
// 204, 304, 103 Early Hints before the answer (kept); close-delimited and
// Connection: close (not kept).
func TestHopResponses(t *testing.T) {
	up, _ := trackedUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/length":
			w.Header().Set("Content-Length", "5")
			fmt.Fprint(w, "fixed")
		case "/chunked":
			fmt.Fprint(w, "chu")
			w.(http.Flusher).Flush()
			fmt.Fprint(w, "nked")
		case "/head":
			w.Header().Set("Content-Length", "10")
		case "/204":
			w.WriteHeader(204)
		case "/304":
			w.WriteHeader(304)
		case "/hints":
			w.Header().Set("Link", "</style.css>; rel=preload")
			w.WriteHeader(103)
			fmt.Fprint(w, "after hints")
		case "/closing":
			w.Header().Set("Connection", "close")
			fmt.Fprint(w, "bye")
		case "/until-close":
			conn, bw, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = bw.WriteString("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end")
			_ = bw.Flush()
			conn.Close()
		}
	})
	fd := startDoor(t, Config{Upstream: up.URL, Hold: time.Minute, MaxHeld: 10, Retry: true})
	fd.launch(t, 1)
	c := newClient(t)
	key := hopKey(t, up.URL)
	for _, k := range []struct {
		method, path string
		code         int
		body         string
		kept         int
	}{
		{"GET", "/length", 200, "fixed", 1},
		{"GET", "/chunked", 200, "chunked", 1},
		{"HEAD", "/head", 200, "", 1},
		{"GET", "/204", 204, "", 1},
		{"GET", "/304", 304, "", 1},
		{"GET", "/hints", 200, "after hints", 1},
		{"GET", "/closing", 200, "bye", 0},
		{"GET", "/length", 200, "fixed", 1},
		{"GET", "/until-close", 200, "until the end", 0},
		{"GET", "/chunked", 200, "chunked", 1},
	} {
		code, body := do1(t, c, k.method, fd.url+k.path, "")
		if code != k.code || body != k.body {
			t.Errorf("%s %s: %d %q, want %d %q", k.method, k.path, code, body, k.code, k.body)
		}
		if n := fd.hop.idleLen(key); n != k.kept {
			t.Errorf("%s %s: %d connections kept, want %d", k.method, k.path, n, k.kept)
		}
	}
}

// TestHopBodyNotReadToEnd: a client that leaves in the middle of an
// answer makes the door close the child's connection (the child's
// handler sees it end), not keep it; the next request opens a new one.
func TestHopBodyNotReadToEnd(t *testing.T) {
	ended := make(chan struct{}, 1)
	up, log := trackedUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/endless" {
			fmt.Fprint(w, "short")
			return
		}
		chunk := strings.Repeat("x", 32<<10)
		for {
			if _, err := fmt.Fprint(w, chunk); err != nil {
				ended <- struct{}{}
				return
			}
			w.(http.Flusher).Flush()
		}
	})
	fd := startDoor(t, Config{Upstream: up.URL, Hold: time.Minute, MaxHeld: 10})
	fd.launch(t, 1)
	c := newClient(t)
	resp, err := c.Get(fd.url + "/endless")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close() // before the end: the client's transport closes its connection
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the child's connection was never closed")
	}
	if code, body := do1(t, c, "GET", fd.url+"/next", ""); code != 200 || body != "short" {
		t.Fatalf("next: %d %q", code, body)
	}
	if n := log.conns(); n != 2 {
		t.Errorf("%d connections carried requests, want 2", n)
	}
}

// TestHopCancelWhileWaiting: a client that leaves while the child has not
// answered yet makes the door close the child's connection at once (the
// child's request context ends), and it is not kept.
func TestHopCancelWhileWaiting(t *testing.T) {
	arrived, gone := make(chan struct{}, 1), make(chan struct{}, 1)
	up, _ := trackedUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // so that the child's server watches the connection
		arrived <- struct{}{}
		select {
		case <-r.Context().Done():
			gone <- struct{}{}
		case <-time.After(10 * time.Second):
			t.Error("the child's request was never cancelled")
		}
	})
	fd := startDoor(t, Config{Upstream: up.URL, Hold: time.Minute, MaxHeld: 10, Retry: true})
	fd.launch(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", fd.url+"/v1/slow", strings.NewReader("p"))
	errc := make(chan error, 1)
	go func() {
		resp, err := newClient(t).Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-arrived
	cancel()
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the child's connection stayed open after the client left")
	}
	if err := <-errc; err == nil {
		t.Error("the cancelled request got an answer")
	}
	if n := fd.hop.idleLen(hopKey(t, up.URL)); n != 0 {
		t.Errorf("%d connections kept after a cancelled request", n)
	}
	if r := fd.meter.retries.Load(); r != 0 {
		t.Errorf("%d door retries of a request the client left", r)
	}
}
