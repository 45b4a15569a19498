package serve

import (
	"net/http"
	"testing"
	"time"
)

// TestOnRequest: each request's arrival is reported, held while the
// child is not ready (what wakes a sleeping server) and not held once it
// is (what times [serve] idle).
func TestOnRequest(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {})
	fd := startDoor(t, Config{Upstream: up.URL, Hold: time.Minute, MaxHeld: 10})
	c := newClient(t)
	done := make(chan error, 1)
	go func() {
		resp, err := c.Get(fd.url + "/v1/models")
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	if held := <-fd.requested; !held {
		t.Fatal("a request before the child was ready reported not held")
	}
	fd.launch(t, 1)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	resp, err := c.Get(fd.url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if held := <-fd.requested; held {
		t.Error("a request to a ready child reported held")
	}
}
