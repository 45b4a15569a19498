package launcher

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/gpuguard/gpuguard/internal/proc"
	"github.com/gpuguard/gpuguard/supervisor"
)

func newTest(t *testing.T) *Launcher {
	t.Helper()
	l := New(Options{Name: "t", Socket: filepath.Join(t.TempDir(), "t.sock"), CgroupParent: proc.CgroupsOff, Logf: t.Logf})
	t.Cleanup(l.Close)
	return l
}

// TestLaunchExit: a real child's exit reaches the supervisor as its
// status, and the child can tell which signals it catches.
func TestLaunchExit(t *testing.T) {
	l := newTest(t)
	c, err := l.Launch(supervisor.LaunchSpec{Argv: []string{"/bin/sh", "-c", "exit 3"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.(supervisor.SignalChecker); !ok {
		t.Error("the child is not a supervisor.SignalChecker")
	}
	<-c.Done()
	if got := c.Exit(); got.Code != 3 || got.Status() != 3 {
		t.Errorf("Exit() = %+v, want code 3", got)
	}

	c, err = l.Launch(supervisor.LaunchSpec{Argv: []string{"/bin/sh", "-c", "kill -TERM $$"}})
	if err != nil {
		t.Fatal(err)
	}
	<-c.Done()
	if got := c.Exit(); got.Signal != syscall.SIGTERM || got.Status() != 143 {
		t.Errorf("Exit() = %+v, want killed by SIGTERM (143)", got)
	}
}

// TestCheck: a command that cannot run is found before any start.
func TestCheck(t *testing.T) {
	l := newTest(t)
	if err := l.Check(supervisor.LaunchSpec{Argv: []string{"/bin/sh"}}); err != nil {
		t.Errorf("Check(/bin/sh) = %v", err)
	}
	err := l.Check(supervisor.LaunchSpec{Argv: []string{filepath.Join(t.TempDir(), "missing")}})
	if !errors.Is(err, proc.ErrNotFound) {
		t.Errorf("Check(missing) = %v, want proc.ErrNotFound", err)
	}
}
