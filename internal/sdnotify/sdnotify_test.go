package sdnotify

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gpuguard/gpuguard/supervisor"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeSystemd listens where NOTIFY_SOCKET points. The directory is short:
// a socket path must fit in 108 bytes and t.TempDir can be long.
func fakeSystemd(t *testing.T) (path string, conn *net.UnixConn) {
	t.Helper()
	dir, err := os.MkdirTemp("", "sdn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path = filepath.Join(dir, "notify")
	conn, err = net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return path, conn
}

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func recv(t *testing.T, conn *net.UnixConn) string {
	t.Helper()
	// The datagram is already queued when send returns; the deadline only
	// turns a missing one into a failure instead of a hang.
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 4096)
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatalf("no datagram: %v", err)
	}
	return string(buf[:n])
}

func TestMessages(t *testing.T) {
	path, conn := fakeSystemd(t)
	n := New(env(map[string]string{"NOTIFY_SOCKET": path}))
	steps := []struct {
		call func() error
		want string
	}{
		{n.Ready, "READY=1"},
		{func() error { return n.Status("running: profile int8 (1/3), watermark 0.93") },
			"STATUS=running: profile int8 (1/3), watermark 0.93"},
		{func() error { return n.Status("two\nlines") }, "STATUS=two lines"},
		{n.Watchdog, "WATCHDOG=1"},
		{n.Stopping, "STOPPING=1"},
	}
	for _, s := range steps {
		if err := s.call(); err != nil {
			t.Fatal(err)
		}
		if got := recv(t, conn); got != s.want {
			t.Errorf("datagram %q, want %q", got, s.want)
		}
	}
}

func TestNoSocketIsNoOp(t *testing.T) {
	for _, n := range []*Notifier{New(env(nil)), nil, {}} {
		for _, f := range []func() error{n.Ready, n.Watchdog, n.Stopping, func() error { return n.Status("x") }} {
			if err := f(); err != nil {
				t.Errorf("%v without NOTIFY_SOCKET", err)
			}
		}
		if n.WatchdogInterval() != 0 || n.Enabled() {
			t.Error("enabled without NOTIFY_SOCKET")
		}
	}
	// WATCHDOG_USEC alone (no service manager to ping) is ignored too.
	if d := New(env(map[string]string{"WATCHDOG_USEC": "30000000"})).WatchdogInterval(); d != 0 {
		t.Errorf("watchdog %v without NOTIFY_SOCKET", d)
	}
}

func TestSocketGoneIsAnError(t *testing.T) {
	n := New(env(map[string]string{"NOTIFY_SOCKET": filepath.Join(t.TempDir(), "gone")}))
	if err := n.Ready(); err == nil {
		t.Fatal("Ready to a missing socket succeeded")
	}
}

func TestWatchdogInterval(t *testing.T) {
	me := strconv.Itoa(os.Getpid())
	tests := []struct {
		usec, pid string
		want      time.Duration
	}{
		{"", "", 0},
		{"30000000", "", 15 * time.Second},
		{"30000000", me, 15 * time.Second},
		{"30000000", "1", 0}, // meant for another process
		{"garbage", "", 0},
		{"-5", "", 0},
	}
	for _, tt := range tests {
		n := New(env(map[string]string{"NOTIFY_SOCKET": "/run/systemd/notify", "WATCHDOG_USEC": tt.usec, "WATCHDOG_PID": tt.pid}))
		if got := n.WatchdogInterval(); got != tt.want {
			t.Errorf("WATCHDOG_USEC=%q WATCHDOG_PID=%q: interval %v, want %v", tt.usec, tt.pid, got, tt.want)
		}
	}
}

func TestCleanEnv(t *testing.T) {
	in := []string{"PATH=/usr/bin", "NOTIFY_SOCKET=/run/systemd/notify", "WATCHDOG_USEC=30000000",
		"WATCHDOG_PID=1", "NOTIFY_SOCKET_X=keep", "MY_WATCHDOG_USEC=keep", "EMPTY="}
	want := []string{"PATH=/usr/bin", "NOTIFY_SOCKET_X=keep", "MY_WATCHDOG_USEC=keep", "EMPTY="}
	if got := CleanEnv(in); !slices.Equal(got, want) {
		t.Errorf("CleanEnv = %q, want %q", got, want)
	}
}

var _ supervisor.Notifier = (*Notifier)(nil)
