package proc

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The Reaper tests are not parallel: a subreaper adopts every orphan of
// the test process, and the Reaper would reap the exits of children other
// tests start without it (a process with a Reaper must pass it to every
// Start). Top-level parallel tests run only after these.

// newReaper starts a Reaper for one test.
func newReaper(t *testing.T) *Reaper {
	t.Helper()
	r, err := NewReaper()
	if err != nil {
		t.Skipf("cannot become a child subreaper here: %v", err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Error(err)
		}
	})
	return r
}

// ppid reads the parent of pid; 0 when pid is gone.
func ppid(pid int) int {
	p, err := readPPID("/proc/"+strconv.Itoa(pid)+"/stat", make([]byte, 512))
	if err != nil {
		return 0
	}
	return p
}

// waitFor polls cond until it holds, failing the test after a deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		<-tick.C
	}
}

// TestReaperAdoptsAndReapsOrphans: a daemon whose parent exits while the
// child runs is re-parented to the subreaper and, once it exits, reaped:
// no zombie is left.
func TestReaperAdoptsAndReapsOrphans(t *testing.T) {
	r := newReaper(t)
	out := newLines()
	// The middle shell forks the daemon and exits; the daemon reads a
	// FIFO until the test opens and closes its write end.
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	spec := sh(`sh -c 'setsid sh -c "echo \$\$; read x < $0" &' "$1"; exec sleep 1000`)
	spec.Argv = append(spec.Argv, "sh", fifo)
	spec.Stdout, spec.Reaper = out, r
	c := start(t, spec)
	daemon := out.nextPID(t)
	killOnCleanup(t, daemon)
	waitFor(t, "the daemon is adopted", func() bool { return ppid(daemon) == os.Getpid() })
	before := r.Reaped()
	f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	waitFor(t, "the daemon is reaped", func() bool {
		_, err := os.Stat("/proc/" + strconv.Itoa(daemon))
		return errors.Is(err, os.ErrNotExist)
	})
	if r.Reaped() <= before {
		t.Errorf("reaped count %d, was %d", r.Reaped(), before)
	}
	c.Kill()
	if e := wait(t, c); e.Signal != syscall.SIGKILL {
		t.Errorf("child: %+v", e)
	}
}

// TestReaperNeverStealsStatuses: with orphans exiting all the time, the
// exit status of every child started through Start and of every os/exec
// command (in gpuguard's own process group) still reaches its waiter.
func TestReaperNeverStealsStatuses(t *testing.T) {
	r := newReaper(t)
	for i := range 30 {
		want := i%7 + 1
		// Each child leaves an orphan that exits at once: SIGCHLDs and
		// scans race with the child's own exit.
		spec := sh(`(setsid sh -c 'exit 0' &); exit ` + strconv.Itoa(want))
		spec.Reaper = r
		c := start(t, spec)
		r.Kick()
		err := exec.Command("/bin/sh", "-c", "exit "+strconv.Itoa(want)).Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != want {
			t.Fatalf("os/exec command: %v, want exit %d", err, want)
		}
		if e := wait(t, c); e.Status() != want {
			t.Fatalf("child %d: status %d, want %d", i, e.Status(), want)
		}
	}
	waitFor(t, "orphans are reaped", func() bool { return r.Reaped() > 0 })
}

// TestZombieWaiting: the peek that lets a scan skip the walk of /proc
// sees a child that has exited and not been reaped, and only that: not a
// running child, not one its waiter has reaped, not a main process whose
// waiter will take it (mine), and it reaps nothing (the child's own Wait
// still gets its status). It runs in a process of its own: the test
// binary may keep zombies adopted by other tests' subreapers, which the
// peek rightly sees.
func TestZombieWaiting(t *testing.T) {
	if os.Getenv("GPUGUARD_ZOMBIE_PEEK") == "" {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestZombieWaiting$", "-test.v")
		cmd.Env = append(os.Environ(), "GPUGUARD_ZOMBIE_PEEK=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !bytes.Contains(out, []byte("--- PASS: TestZombieWaiting")) {
			t.Fatalf("in a process of its own: %v\n%s", err, out)
		}
		return
	}
	r := &Reaper{mine: make(map[int]bool)}
	cmd := exec.Command("/bin/sh", "-c", "read x; exit 3")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "no zombie while the child runs", func() bool { return !r.zombieWaiting() })
	stdin.Close()
	waitFor(t, "the exited child is seen", r.zombieWaiting)
	r.mine[cmd.Process.Pid] = true
	if r.zombieWaiting() {
		t.Error("a main process's exit, which its own waiter takes, was taken for an orphan's")
	}
	if err := cmd.Wait(); cmd.ProcessState.ExitCode() != 3 {
		t.Fatalf("child's own wait: %v, want exit 3", err)
	}
	delete(r.mine, cmd.Process.Pid)
	waitFor(t, "no zombie once it is reaped", func() bool { return !r.zombieWaiting() })
}

// TestReadSmall reads a file whole, past the first buffer's size, and
// says a missing one does not exist (children() tells an exited thread by
// that).
func TestReadSmall(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	want := bytes.Repeat([]byte("1234 "), 1000)
	if err := os.WriteFile(p, want, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := readSmall(p, make([]byte, 0, 16))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("readSmall = %d bytes, %v; want %d bytes", len(got), err, len(want))
	}
	if _, err := readSmall(filepath.Join(t.TempDir(), "none"), nil); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v, want ErrNotExist", err)
	}
}
