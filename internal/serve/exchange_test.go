package serve

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"testing"
	"time"
)

// TestRequestBodies: bodies of known length, of unknown length
// (chunked), empty, none, and ones sent with Expect: 100-continue, each
// reach the child whole, with the framing the client chose; the
// expectation reaches the child with a body the door streams, not with
// one it read whole first. The answer to a chunked request closes the
// client's connection (the door does not follow a chunked body to find
// the next request: clientConn).
func TestRequestBodies(t *testing.T) {
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
	big := strings.Repeat("b", 5<<20) // over what the door keeps to resend
	for _, k := range []struct {
		name   string
		method string
		body   func() io.Reader
		expect bool
		want   string
		close  bool
	}{
		{"length", http.MethodPost, func() io.Reader { return strings.NewReader("hello") }, false, "len=5 te=[] expect=\"\" body=hello", false},
		{"chunked", http.MethodPost, func() io.Reader { return io.MultiReader(strings.NewReader("hel"), strings.NewReader("lo")) }, false,
			"len=-1 te=[chunked] expect=\"\" body=hello", true},
		{"empty", http.MethodPost, func() io.Reader { return strings.NewReader("") }, false, "len=0 te=[] expect=\"\" body=", false},
		{"none", http.MethodGet, func() io.Reader { return nil }, false, "len=0 te=[] expect=\"\" body=", false},
		{"100-continue-read-whole", http.MethodPut, func() io.Reader { return strings.NewReader("hello") }, true,
			"len=5 te=[] expect=\"\" body=hello", false},
		{"100-continue-streamed", http.MethodPut, func() io.Reader { return strings.NewReader(big) }, true,
			fmt.Sprintf("len=%d te=[] expect=\"100-continue\" body=%s", len(big), big), false},
		{"large", http.MethodPost, func() io.Reader { return strings.NewReader(big) }, false,
			fmt.Sprintf("len=%d te=[] expect=\"\" body=%s", len(big), big), false},
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
			if resp.Close != k.close {
				t.Errorf("the answer closes the connection: %v, want %v", resp.Close, k.close)
			}
		})
	}
}

// TestResponses: each kind of answer reaches the client whole: known
// length, chunked, HEAD, 204, 304, 103 Early Hints before the answer
// (the hints passed on), close-delimited and Connection: close.
func TestResponses(t *testing.T) {
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
			if conn, _ := hijackWrite(t, w, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end"); conn != nil {
				conn.Close()
			}
		}
	})
	fd := startDoor(t, Config{Upstream: up.URL, Hold: time.Minute, MaxHeld: 10, Retry: true})
	fd.launch(t, 1)
	c := newClient(t)
	for _, k := range []struct {
		method, path string
		code         int
		body         string
	}{
		{"GET", "/length", 200, "fixed"},
		{"GET", "/chunked", 200, "chunked"},
		{"HEAD", "/head", 200, ""},
		{"GET", "/204", 204, ""},
		{"GET", "/304", 304, ""},
		{"GET", "/hints", 200, "after hints"},
		{"GET", "/closing", 200, "bye"},
		{"GET", "/length", 200, "fixed"},
		{"GET", "/until-close", 200, "until the end"},
		{"GET", "/chunked", 200, "chunked"},
	} {
		resp, body := do1(t, c, k.method, fd.url+k.path, "")
		if resp.StatusCode != k.code || body != k.body {
			t.Errorf("%s %s: %d %q, want %d %q", k.method, k.path, resp.StatusCode, body, k.code, k.body)
		}
	}
	var hints []string
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		hints = append(hints, fmt.Sprint(code, " ", h.Get("Link")))
		return nil
	}}
	req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", fd.url+"/hints", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if fmt.Sprint(hints) != "[103 </style.css>; rel=preload]" {
		t.Errorf("the client saw informational answers %q, want the 103 with its Link", hints)
	}
}

// TestBodyNotReadToEnd: a client that leaves in the middle of an answer
// makes the door close the child's connection (the child's handler sees
// it end), not keep it; the next request opens a new one.
func TestBodyNotReadToEnd(t *testing.T) {
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
	if resp, body := do1(t, c, "GET", fd.url+"/next", ""); resp.StatusCode != 200 || body != "short" {
		t.Fatalf("next: %d %q", resp.StatusCode, body)
	}
	if n := log.conns(); n != 2 {
		t.Errorf("%d connections carried requests, want 2", n)
	}
}

// TestCancelWhileWaiting: a client that leaves while the child has not
// answered yet makes the door close the child's connection at once (the
// child's request context ends), and the request is not sent again.
func TestCancelWhileWaiting(t *testing.T) {
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
	if r := fd.meter.retries.Load(); r != 0 {
		t.Errorf("%d door retries of a request the client left", r)
	}
}
