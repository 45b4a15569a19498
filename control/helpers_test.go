package control

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/admission"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeBackend is a ladder of profiles and a ledger, enough to answer every
// request type.
type fakeBackend struct {
	mu       sync.Mutex
	profiles []string
	level    int
	ooms     []string
	reserves []admission.Request
	leases   map[string]bool
}

func newFakeBackend() *fakeBackend {
	return &fakeBackend{profiles: []string{"fp16", "int8", "int4"}, leases: map[string]bool{}}
}

func (f *fakeBackend) Status() api.Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	return api.Status{
		Name: "demo", PID: 42, ChildPID: 43, State: api.StateRunning,
		Profile: f.profiles[f.level], Level: f.level, Levels: len(f.profiles),
		Watermark: 0.5, Leases: len(f.leases),
		GPUs: []api.GPU{{Index: 0, UUID: "GPU-0", Name: "Sim", UsedBytes: 1 << 30, TotalBytes: 16 << 30}},
	}
}

func (f *fakeBackend) Step(_ context.Context, dir string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	next := f.level + 1
	if dir == StepUp {
		next = f.level - 1
	}
	if next < 0 || next >= len(f.profiles) {
		return "", fmt.Errorf("cannot step %s from %s: no profile there", dir, f.profiles[f.level])
	}
	f.level = next
	return f.profiles[next], nil
}

func (f *fakeBackend) MarkOOM(detail string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ooms = append(f.ooms, detail)
}

func (f *fakeBackend) Reserve(_ context.Context, r admission.Request) (admission.Decision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reserves = append(f.reserves, r)
	if r.Bytes > 1<<30 {
		return admission.Decision{Decision: admission.DecisionCPU, Reason: "too big"}, nil
	}
	id := fmt.Sprintf("lease-%d", len(f.reserves))
	f.leases[id] = true
	return admission.Decision{Decision: admission.DecisionGPU, Lease: id, Reason: "fits"}, nil
}

func (f *fakeBackend) Release(_ context.Context, lease string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.leases[lease] {
		return fmt.Errorf("unknown lease %q", lease)
	}
	delete(f.leases, lease)
	return nil
}

// serve listens in a fresh runtime dir and serves b until the test ends.
// tweak, if set, adjusts the server's bounds before Serve.
func serve(t testing.TB, b Backend, tweak func(*Server)) *Server {
	t.Helper()
	s, err := Listen(filepath.Join(t.TempDir(), "run"), "demo")
	if err != nil {
		t.Fatal(err)
	}
	if tweak != nil {
		tweak(s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, b) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// rawConn is a client that speaks lines, to test the wire as it is.
type rawConn struct {
	t  testing.TB
	nc net.Conn
	r  *bufio.Reader
}

func dialRaw(t testing.TB, path string) *rawConn {
	t.Helper()
	nc, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc, r: bufio.NewReader(nc)}
}

func (c *rawConn) send(line string) {
	c.t.Helper()
	if _, err := c.nc.Write([]byte(line + "\n")); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

// recv reads one reply line as a map; it fails the test at EOF.
func (c *rawConn) recv() map[string]any {
	c.t.Helper()
	line, err := c.r.ReadBytes('\n')
	if err != nil {
		c.t.Fatalf("recv: %v (got %q)", err, line)
	}
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		c.t.Fatalf("reply %q is not a JSON object: %v", line, err)
	}
	return m
}

// expectEOF reads to the end and fails if a further line arrives.
func (c *rawConn) expectEOF() {
	c.t.Helper()
	line, err := c.r.ReadBytes('\n')
	if err == nil || len(line) > 0 {
		c.t.Fatalf("want the connection closed, got %q, %v", line, err)
	}
}

func (c *rawConn) roundTrip(line string) map[string]any {
	c.t.Helper()
	c.send(line)
	return c.recv()
}
