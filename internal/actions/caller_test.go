package actions

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDoSends: the method, path, query, body, content type and headers
// reach the server as given, and any 2xx is a success.
func TestDoSends(t *testing.T) {
	type seen struct{ method, uri, body, ctype, key string }
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.RequestURI, string(b), r.Header.Get("Content-Type"), r.Header.Get("X-Key")}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	o := New().Do(context.Background(), Request{Method: "PUT", URL: srv.URL + "/sleep?level=1&mode=wait",
		Body: `{"a":1}`, ContentType: "application/json", Header: map[string]string{"X-Key": "k"}, Timeout: 10 * time.Second})
	if !o.OK() || o.Status != http.StatusNoContent {
		t.Fatalf("outcome = %+v, want 204 OK", o)
	}
	want := seen{"PUT", "/sleep?level=1&mode=wait", `{"a":1}`, "application/json", "k"}
	if s := <-got; s != want {
		t.Errorf("server saw %+v, want %+v", s, want)
	}
}

// TestDoFailures: a non-2xx answer (a redirect included), no answer in
// time and a refused connection are failures naming the status or error.
func TestDoFailures(t *testing.T) {
	notFound := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"detail":"Not Found"}`, http.StatusNotFound)
	}))
	defer notFound.Close()
	redirect := httptest.NewServer(http.RedirectHandler("/elsewhere", http.StatusFound))
	defer redirect.Close()
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hang.Close()
	defer close(release)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String()
	ln.Close()

	c := New()
	for _, tt := range []struct {
		name, url string
		timeout   time.Duration
		status    int
		msg       string
		is        error
	}{
		{"404", notFound.URL + "/sleep", time.Minute, 404, "answered 404 Not Found", nil},
		{"redirect", redirect.URL + "/x", time.Minute, 302, "answered 302", nil},
		{"timeout", hang.URL + "/sleep", 50 * time.Millisecond, 0, "no answer within 50ms", context.DeadlineExceeded},
		{"refused", refused + "/sleep", time.Minute, 0, "connection refused", syscall.ECONNREFUSED},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := c.Do(context.Background(), Request{Method: "POST", URL: tt.url, Timeout: tt.timeout})
			if o.OK() || o.Status != tt.status || o.Err == nil || !strings.Contains(o.Err.Error(), tt.msg) {
				t.Fatalf("outcome = %+v (err %v), want a failure with status %d containing %q", o, o.Err, tt.status, tt.msg)
			}
			if tt.is != nil && !errors.Is(o.Err, tt.is) {
				t.Errorf("error %v is not %v", o.Err, tt.is)
			}
		})
	}
}
