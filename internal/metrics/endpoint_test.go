package metrics

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func get(addr string) (string, error) {
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// freeAddr is a loopback address whose port was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestEndpointMoves: a committed move serves on the new address and stops
// the old one; a move to a port in use fails at Prepare with the old
// address still serving; an aborted move leaves it serving too and frees
// the prepared port; "" stops serving.
func TestEndpointMoves(t *testing.T) {
	m := New("llama", testStatus)
	e := NewEndpoint(m.Handler())
	defer e.Close()
	a, b := freeAddr(t), freeAddr(t)

	mv, err := e.Prepare(a)
	if err != nil {
		t.Fatal(err)
	}
	if e.Addr() != "" {
		t.Fatalf("Addr %q before Commit", e.Addr())
	}
	mv.Commit()
	mv.Abort() // after Commit: nothing
	if body, err := get(a); err != nil || !strings.Contains(body, `gpuguard_child_up{name="llama"}`) {
		t.Fatalf("scrape %s: %v", a, err)
	}

	// b is taken: Prepare fails, a keeps serving.
	blocker, err := Listen(b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Prepare(b); err == nil || !strings.Contains(err.Error(), b) {
		t.Fatalf("Prepare on a port in use: %v", err)
	}
	blocker.Close()
	if _, err := get(a); err != nil {
		t.Fatalf("after a failed Prepare, %s stopped serving: %v", a, err)
	}

	// An aborted move changes nothing and frees b.
	mv, err = e.Prepare(b)
	if err != nil {
		t.Fatal(err)
	}
	mv.Abort()
	mv.Commit() // after Abort: nothing
	if e.Addr() != a {
		t.Fatalf("Addr %q after an aborted move, want %s", e.Addr(), a)
	}
	if ln, err := Listen(b); err != nil {
		t.Fatalf("the aborted move still holds %s: %v", b, err)
	} else {
		ln.Close()
	}

	// A committed move to b: b serves, a does not.
	mv, err = e.Prepare(b)
	if err != nil {
		t.Fatal(err)
	}
	mv.Commit()
	if _, err := get(b); err != nil {
		t.Fatalf("scrape %s after the move: %v", b, err)
	}
	waitRefused(t, a)

	// "" stops serving.
	mv, _ = e.Prepare("")
	mv.Commit()
	waitRefused(t, b)
	if e.Addr() != "" {
		t.Errorf("Addr %q after moving to \"\"", e.Addr())
	}
}

// waitRefused waits until addr no longer answers (the old server shuts
// down in the background).
func waitRefused(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := get(addr); err != nil {
			return
		}
	}
	t.Fatalf("%s still serves 30s after the move", addr)
}
