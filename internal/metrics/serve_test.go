package metrics

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestServeMetrics(t *testing.T) {
	m := New("llama", testStatus)
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, m.Handler()) }()

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get("http://" + ln.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	for _, want := range []string{
		`gpuguard_watermark_ratio{name="llama"} 0.93`,
		`gpuguard_child_up{name="llama"} 1`,
		`go_goroutines{name="llama"}`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve after cancel: %v", err)
	}
	if _, err := client.Get("http://" + ln.Addr().String() + "/metrics"); err == nil {
		t.Fatal("still serving after Serve returned")
	}
}

func TestListenPortInUse(t *testing.T) {
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = Listen(ln.Addr().String())
	if err == nil {
		t.Fatal("second Listen on the same port succeeded")
	}
	if !strings.Contains(err.Error(), ln.Addr().String()) {
		t.Errorf("error %q does not name the address", err)
	}
}

func TestListenEmpty(t *testing.T) {
	if _, err := Listen(""); err == nil {
		t.Fatal("Listen(\"\") succeeded")
	}
}

func TestSnapshotNil(t *testing.T) {
	m := New("x", nil)
	if _, err := m.Gatherer().Gather(); err != nil {
		t.Fatal(err)
	}
}
