package control

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

func TestClient(t *testing.T) {
	s := serve(t, newFakeBackend(), nil)
	ctx := context.Background()
	c, err := Dial(ctx, s.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	st, err := c.Status(ctx)
	if err != nil || st.Name != "demo" || st.Profile != "fp16" || st.Levels != 3 {
		t.Fatalf("Status = %+v, %v", st, err)
	}
	if p, err := c.Step(ctx, StepDown); err != nil || p != "int8" {
		t.Fatalf("Step down = %q, %v", p, err)
	}
	c.Step(ctx, StepUp)
	_, err = c.Step(ctx, StepUp)
	var re *RemoteError
	if !errors.As(err, &re) || !strings.Contains(re.Message, "cannot step up") {
		t.Fatalf("Step past the top = %v, want a RemoteError", err)
	}
	m, err := c.Request(ctx, map[string]any{"type": "reserve", "bytes": 512, "id": "r1"})
	if err != nil || m["decision"] != "gpu" || m["id"] != "r1" {
		t.Fatalf("Request reserve = %v, %v", m, err)
	}
	m, err = c.Request(ctx, map[string]any{"type": "nope"})
	if !errors.As(err, &re) || m["ok"] != false {
		t.Fatalf("Request nope = %v, %v", m, err)
	}

	// Subscribe uses its own connection: this client keeps answering.
	sctx, cancel := context.WithCancel(ctx)
	events, err := c.Subscribe(sctx)
	if err != nil {
		t.Fatal(err)
	}
	s.Publish(api.ProfileState{Seq: 1, Level: 1, Profile: "int8", Reason: "manual"})
	if ev := <-events; ev.Profile != "int8" || ev.Type != "profile" || ev.Seq != 1 {
		t.Fatalf("event = %+v", ev)
	}
	if _, err := c.Status(ctx); err != nil {
		t.Fatalf("Status while subscribed: %v", err)
	}
	cancel()
	for range events {
	}

	// Closing the client ends its subscriptions too.
	events, err = c.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	for range events {
	}
	if _, err := c.Status(ctx); err == nil {
		t.Error("Status after Close succeeded")
	}
}

// TestRequestRefusedReload: Request's RemoteError carries a refused
// reload's problems, as Reload's does.
func TestRequestRefusedReload(t *testing.T) {
	s := serve(t, &fakeReloader{fakeBackend: newFakeBackend(), err: problemList{errors.New("p.toml:1: name: bad")}}, nil)
	ctx := context.Background()
	c, err := Dial(ctx, s.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m, err := c.Request(ctx, map[string]any{"type": TypeReload})
	var re *RemoteError
	if !errors.As(err, &re) || m["ok"] != false || re.Message != "2 problems" || !slices.Equal(re.Errors, []string{"p.toml:1: name: bad"}) {
		t.Fatalf("Request reload = %v, %#v", m, err)
	}
}

func TestClientSubscriptionEndsWhenDropped(t *testing.T) {
	s := serve(t, newFakeBackend(), func(s *Server) { s.lim.subBuffer = 1 })
	ctx := context.Background()
	c, err := Dial(ctx, s.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	events, err := c.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// One event goes through while the subscriber keeps up.
	env := map[string]string{"PAD": strings.Repeat("x", 8192)}
	s.Publish(api.ProfileState{Seq: 0, Env: env})
	if ev, ok := <-events; !ok || ev.Seq != 0 {
		t.Fatalf("first event: %+v %v", ev, ok)
	}
	// Then nobody reads: the client's channel (16) and socket fill, the
	// server's queue (1) overflows and the subscriber is dropped. (Whether
	// any of these reach the channel first is the scheduler's business.)
	for i := 1; i < 2000; i++ {
		s.Publish(api.ProfileState{Seq: i, Env: env})
	}
	n := 1
	for range events {
		n++
	}
	if n >= 2000 {
		t.Errorf("got all %d events: the subscriber was never dropped", n)
	}
}

func TestClientHonoursContext(t *testing.T) {
	// A server that accepts but never answers.
	path := filepath.Join(t.TempDir(), "hung.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// Dial on its own context: the short deadline is for the request, and
	// a dial that started after 50 ms on a busy machine would fail first.
	dctx, dcancel := context.WithTimeout(context.Background(), time.Minute)
	defer dcancel()
	c, err := Dial(dctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.Status(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Status = %v, want DeadlineExceeded", err)
	}
	if _, err := c.Status(context.Background()); err == nil || !strings.Contains(err.Error(), "unusable") {
		t.Fatalf("Status after a cut-short request = %v, want the connection marked unusable", err)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if _, err := c.Subscribe(ctx2); err == nil {
		t.Error("Subscribe with a cancelled context succeeded")
	}
}

func TestDiscoverAndQuery(t *testing.T) {
	live := serve(t, newFakeBackend(), nil)
	liveDir := filepath.Dir(live.Path())

	other := t.TempDir()
	// A dead instance: socket file, nothing listening, lock file with a pid.
	stale := filepath.Join(other, "dead.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	os.WriteFile(filepath.Join(other, "dead.lock"), []byte("4242\n"), 0o600)
	// An instance that never answers.
	hung, err := net.Listen("unix", filepath.Join(other, "hung.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer hung.Close()
	// Not instances.
	os.WriteFile(filepath.Join(other, "file.sock"), nil, 0o600)
	os.WriteFile(filepath.Join(other, "notes.txt"), nil, 0o600)

	ins, err := Discover([]string{liveDir, other, filepath.Join(other, "missing")})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, in := range ins {
		names = append(names, in.Name)
	}
	if strings.Join(names, ",") != "dead,demo,hung" {
		t.Fatalf("Discover = %+v", ins)
	}
	if ins[0].PID != 4242 || ins[1].PID != os.Getpid() || ins[2].PID != 0 {
		t.Errorf("pids %d %d %d", ins[0].PID, ins[1].PID, ins[2].PID)
	}

	// The live instance must answer within the timeout on a loaded
	// machine too; only the hung one waits it out (in parallel).
	sts := QueryAll(context.Background(), ins, 5*time.Second)
	if sts[1].State != api.StateRunning || sts[1].Name != "demo" {
		t.Errorf("live = %+v", sts[1])
	}
	for i, want := range map[int]string{0: "not running (stale socket", 2: "no answer within 5s"} {
		st := sts[i]
		if st.State != api.StateUnreachable || !strings.Contains(st.Error, want) || st.GPUs == nil || st.Name != ins[i].Name || st.PID != ins[i].PID {
			t.Errorf("%s = %+v, want unreachable with %q", ins[i].Name, st, want)
		}
	}
}

func TestDiscoverReportsUnreadableDirs(t *testing.T) {
	if os.Geteuid() == 0 {
		// Root reads any dir; use a file where a dir is expected instead.
		f := filepath.Join(t.TempDir(), "f")
		os.WriteFile(f, nil, 0o600)
		if _, err := Discover([]string{f}); !errors.Is(err, syscall.ENOTDIR) {
			t.Fatalf("Discover(file) = %v", err)
		}
		return
	}
	d := t.TempDir()
	os.Chmod(d, 0)
	defer os.Chmod(d, 0o700)
	if _, err := Discover([]string{d}); err == nil {
		t.Fatal("Discover of an unreadable dir succeeded")
	}
}

// TestClientErrorsNameTheSocket: an error on a connection names the
// socket the client dialled, never the temporary path the server bound
// (which the kernel reports as the peer's address).
func TestClientErrorsNameTheSocket(t *testing.T) {
	b := newFakeBackend()
	s := serve(t, b, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, s.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Status(ctx); err != nil { // Serve runs
		t.Fatal(err)
	}
	s.Close() // the connection breaks under the client
	_, err = c.Status(ctx)
	if err == nil {
		t.Fatal("status over a closed server: no error")
	}
	if msg := err.Error(); !strings.Contains(msg, s.Path()) || strings.Contains(msg, "/.b") {
		t.Errorf("error %q: want the socket's path and not the bind path", msg)
	}
}
