package door

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// socketDir is a runtime dir for control sockets, removed when the test
// ends: a short path, whatever the test's name, since a socket's takes
// 108 bytes at most.
func socketDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "gd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// fakeSocket is an instance's control socket that answers status requests
// with st, or, while hung, never answers.
type fakeSocket struct {
	ln    *net.UnixListener
	mu    sync.Mutex
	st    api.Status
	hung  bool
	conns []net.Conn
}

func newFakeSocket(t *testing.T, dir, name string, st api.Status) *fakeSocket {
	t.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, name+".sock"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeSocket{ln: ln, st: st}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			f.conns = append(f.conns, c)
			f.mu.Unlock()
			go f.serve(c)
		}
	}()
	return f
}

func (f *fakeSocket) serve(c net.Conn) {
	defer c.Close()
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		f.mu.Lock()
		st, hung := f.st, f.hung
		f.mu.Unlock()
		if hung {
			_, _ = c.Read(make([]byte, 1)) // until the client gives up
			return
		}
		b, _ := json.Marshal(st)
		reply := `{"ok":true,` + strings.TrimPrefix(string(b), "{")
		if _, err := c.Write([]byte(reply + "\n")); err != nil {
			return
		}
	}
}

func (f *fakeSocket) set(st api.Status, hung bool) {
	f.mu.Lock()
	f.st, f.hung = st, hung
	f.mu.Unlock()
}

// stale closes the listener and every connection but leaves the socket
// file, as a killed instance does: connections are refused.
func (f *fakeSocket) stale() {
	f.ln.SetUnlinkOnClose(false)
	f.ln.Close()
	f.mu.Lock()
	for _, c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
}

// restart closes every connection, as an instance that restarts under the
// same socket does; the listener goes on.
func (f *fakeSocket) restart() {
	f.mu.Lock()
	for _, c := range f.conns {
		c.Close()
	}
	f.conns = nil
	f.mu.Unlock()
}

// TestWatcherFollowsInstances: over its control sockets, the watcher routes
// an instance that answers, keeps one that stops answering as unreachable
// (its models get 503, not 404), and drops one that is gone: a socket
// removed, or left behind and refusing connections. One that never
// answered is not routed.
func TestWatcherFollowsInstances(t *testing.T) {
	dir := socketDir(t)
	var logMu sync.Mutex
	var logs []string
	w := NewWatcher([]string{dir, filepath.Join(dir, "missing")}, nil, func(f string, a ...any) {
		logMu.Lock()
		logs = append(logs, f)
		logMu.Unlock()
	})
	w.timeout = 200 * time.Millisecond
	ctx := context.Background()
	routed := func() string {
		var out []string
		for _, name := range w.Table().Names() {
			b := w.Table().Pick(name)
			out = append(out, name+"@"+b.Name+":"+b.State())
		}
		return strings.Join(out, " ")
	}
	check := func(want string) {
		t.Helper()
		w.Refresh(ctx)
		if got := routed(); got != want {
			t.Fatalf("routed %q, want %q", got, want)
		}
	}
	check("")

	a := newFakeSocket(t, dir, "a", api.Status{Name: "a", State: api.StateRunning, Ready: true, Serve: "127.0.0.1:8001", Models: []string{"m", "alias"}})
	newFakeSocket(t, dir, "nodoor", api.Status{Name: "nodoor", State: api.StateRunning})
	check("alias@a:ready m@a:ready")

	hung := newFakeSocket(t, dir, "b", api.Status{Name: "b", Serve: ":8002"})
	hung.set(api.Status{}, true)
	check("alias@a:ready m@a:ready")

	a.set(api.Status{}, true)
	check("alias@a:unreachable m@a:unreachable")
	if b := w.Table().Pick("m"); !b.Unreachable() || !strings.Contains(b.Status.Error, "no answer within") || b.Addr != "127.0.0.1:8001" {
		t.Fatalf("unreachable backend %+v", b)
	}
	a.set(api.Status{Name: "a", State: api.StateAsleep, Serve: "127.0.0.1:8001", Models: []string{"m"}}, false)
	check("m@a:asleep")
	a.restart() // its kept connection breaks: the same round asks again
	check("m@a:asleep")

	c := newFakeSocket(t, dir, "c", api.Status{Name: "c", State: api.StateRunning, Ready: true, Serve: ":8003", Models: []string{"m"}})
	check("m@c:ready")
	if got := len(w.Table().Replicas("m")); got != 2 {
		t.Fatalf("%d replicas of m", got)
	}
	a.stale()
	check("m@c:ready")
	if err := os.Remove(filepath.Join(dir, "c.sock")); err != nil {
		t.Fatal(err)
	}
	check("")
	_ = c

	logMu.Lock()
	defer logMu.Unlock()
	got := strings.Join(logs, "\n")
	for _, want := range []string{"routing %s", "instance %q does not answer on %s: %s", "instance %q answers again", "instance %q is gone: no longer routing %s"} {
		if !strings.Contains(got, want) {
			t.Errorf("no log %q in:\n%s", want, got)
		}
	}
}

// TestWatcherRun: Run refreshes until its context ends.
func TestWatcherRun(t *testing.T) {
	dir := socketDir(t)
	asked := make(chan string, 100)
	w := NewWatcher([]string{dir}, func(ctx context.Context, socket string) (api.Status, error) {
		asked <- socket
		return api.Status{Name: "a", Serve: ":1", State: api.StateRunning}, nil
	}, nil)
	newFakeSocket(t, dir, "a", api.Status{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- w.Run(ctx) }()
	for range 2 { // the first round at once, the second WatchEvery later
		<-asked
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !w.Table().Has("a") {
		t.Fatal("not routed")
	}
}
