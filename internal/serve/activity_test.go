package serve

import (
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"
)

// TestActivity: a streamed answer is in flight from the request until its
// last chunk, and the door's last answer is dated at that chunk, not at
// the request's arrival: [serve] idle counts from there.
func TestActivity(t *testing.T) {
	next := make(chan struct{})
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for i := range 3 {
			<-next
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
		}
	})
	fd := startDoor(t, Config{Upstream: up.URL, Hold: time.Minute, MaxHeld: 10})
	fd.launch(t, 1)
	if fd.InFlight() != 0 || !fd.LastAnswer().IsZero() {
		t.Fatalf("before any request: in flight %d, last answer %v; want 0 and none", fd.InFlight(), fd.LastAnswer())
	}
	resp, err := newClient(t).Get(fd.url + "/v1/completions")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	arrived := time.Now()
	buf := make([]byte, 64)
	for range 2 {
		next <- struct{}{}
		if _, err := resp.Body.Read(buf); err != nil {
			t.Fatal(err)
		}
		if fd.InFlight() != 1 || !fd.LastAnswer().IsZero() {
			t.Fatalf("mid-stream: in flight %d, last answer %v; want 1 and none", fd.InFlight(), fd.LastAnswer())
		}
	}
	lastChunk := time.Now()
	next <- struct{}{}
	if _, err := io.ReadAll(resp.Body); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for fd.InFlight() != 0 { // the handler returns just after the client read the end
		if time.Now().After(deadline) {
			t.Fatalf("in flight %d after the stream ended, want 0", fd.InFlight())
		}
		time.Sleep(time.Millisecond)
	}
	if end := fd.LastAnswer(); end.Before(lastChunk) || end.Before(arrived) {
		t.Fatalf("last answer %v, want at or after the last chunk (%v)", end, lastChunk)
	}
}
