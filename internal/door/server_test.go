package door

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/gpuguard/gpuguard/api"
)

// TestOpenAddressInUse: an address in use at start is a ListenError that
// names the flag and the address in one line, and leaves nothing bound.
func TestOpenAddressInUse(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	addr := busy.Addr().String()
	for _, tt := range []struct{ flag, listen, metrics string }{
		{"--listen", addr, ""},
		{"--metrics-addr", "127.0.0.1:0", addr},
	} {
		_, err := Open(Config{Listen: tt.listen, MetricsAddr: tt.metrics})
		var le *ListenError
		if !errors.As(err, &le) || !errors.Is(err, syscall.EADDRINUSE) {
			t.Fatalf("%s in use: %v", tt.flag, err)
		}
		if want := tt.flag + " " + addr + ": bind: address already in use"; err.Error() != want {
			t.Errorf("message %q, want %q", err, want)
		}
	}
}

// TestServerRun: Run routes with the first table already made, serves the
// metrics, and returns once its context ends.
func TestServerRun(t *testing.T) {
	llm := newFakeInstance(t, "llm", nil)
	dir := socketDir(t)
	newFakeSocket(t, dir, "llm", api.Status{})
	s, err := Open(Config{Listen: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0", RuntimeDirs: []string{dir}, MaxBody: 1 << 20,
		Query: func(context.Context, string) (api.Status, error) {
			return llm.found(api.StateRunning, true, "m").Status, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	resp, body := do(t, "POST", "http://"+s.Addr().String()+"/v1/completions", `{"model":"m"}`)
	if resp.StatusCode != 200 || resp.Header.Get(HeaderInstance) != "llm" {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	mresp, err := http.Get("http://" + s.mln.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	mb, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	if !strings.Contains(string(mb), `gpuguard_door_requests_total{code="200",model="m"} 1`) || !strings.Contains(string(mb), "gpuguard_door_instances 1") {
		t.Errorf("metrics:\n%s", mb)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := net.Dial("tcp", s.Addr().String()); err == nil {
		t.Error("still listening after Run returned")
	}
}
