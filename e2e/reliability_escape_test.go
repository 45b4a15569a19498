package e2e

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// pfReadPID waits for a file holding a pid (written to a temp name, then
// renamed) and returns the pid.
func pfReadPID(t *testing.T, path string) int {
	t.Helper()
	pid := 0
	if !pfEventually(10*time.Second, func() bool {
		b, err := os.ReadFile(path)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	}) {
		t.Fatalf("no pid in %s", path)
	}
	return pid
}

// TestEscapedDaemonAtStop: the child starts a daemon that leaves its
// process group, by setsid alone or by the classic double fork (fork,
// setsid, fork, the middle process exits), then runs until gpuguard is
// stopped. While gpuguard runs, the double-forked daemon is re-parented
// to gpuguard (a child subreaper), not to init. At the stop: with a cgroup
// per child the daemon is killed; with process groups only it survives,
// re-parented to init once gpuguard exits (docs/reliability.md).
func TestEscapedDaemonAtStop(t *testing.T) {
	t.Parallel()
	for _, mode := range pfModes(t) {
		for _, how := range []string{"setsid", "double-fork"} {
			t.Run(mode.name+"/"+how, func(t *testing.T) {
				e := newEnv(t)
				pol := e.policy(pfPolicy)
				daemonSh, pidFile := e.path("daemon.sh"), e.path("daemon")
				if err := os.WriteFile(daemonSh, []byte(pfDaemonScript), 0o755); err != nil {
					t.Fatal(err)
				}
				start := map[string]string{
					"setsid":      `setsid /bin/sh "$1" "$2" final </dev/null >/dev/null 2>&1 &`,
					"double-fork": `/bin/sh "$1" "$2" first </dev/null >/dev/null 2>&1 &`,
				}[how]
				script := start + `
trap 'exit 0' TERM
echo ready
while :; do sleep 0.02; done`
				p := e.start(append([]string{"run", "--policy", pol, "--name", "esc"}, sh(script, daemonSh, pidFile)...), mode.env...)
				p.expect("ready")
				daemon := pfReadPID(t, pidFile)
				pfKill(t, daemon)
				gg := p.cmd.Process.Pid
				st, _ := pfReadStat(daemon)
				if how == "double-fork" {
					if st.pgrp == daemon {
						t.Fatal("the double-forked daemon leads its group: it is the session leader, not its child")
					}
					if !pfEventually(10*time.Second, func() bool { st, _ := pfReadStat(daemon); return st.ppid == gg }) {
						st, _ := pfReadStat(daemon)
						t.Errorf("the orphaned daemon's parent is %d, not gpuguard (%d): no subreaper", st.ppid, gg)
					}
				}
				if mode.cgroup != pfInChildCgroup(daemon) {
					t.Errorf("daemon cgroup %q in mode %s", pfCgroup(daemon), mode.name)
				}
				p.signal(syscall.SIGTERM)
				if code := p.wait(); code != 0 {
					t.Fatalf("exit %d; stderr:\n%s", code, p.stderr.String())
				}
				if mode.cgroup {
					if !pfGone(daemon, 5*time.Second) {
						t.Fatalf("the daemon %d survived the stop", daemon)
					}
					return
				}
				if !pfAlive(daemon) {
					t.Fatal("process-group mode: the daemon died; the documented limit changed")
				}
				t.Logf("process-group mode: the %s daemon survives the stop, as documented", how)
			})
		}
	}
}

// pfDaemonScript daemonizes: "first" is forked by the child, makes itself
// a session leader (setsid, no fork: it does not lead a group) and forks
// "final", then exits: the daemon is in a new session and group, and its
// parent is gone. "final" records its pid and sleeps.
const pfDaemonScript = `case "$2" in
first) exec setsid /bin/sh "$0" "$1" second;;
second) /bin/sh "$0" "$1" final & exit 0;;
final) echo $$ > "$1.tmp"; mv "$1.tmp" "$1"; exec sleep 1000;;
esac
`

// pfOrphans is a child that makes five orphans, each of which records
// its pid in $1 and then waits for the FIFO $2 to be opened and closed for
// writing before it exits; then the child runs until stopped.
const pfOrphans = `for i in 1 2 3 4 5; do
  (setsid sh -c 'echo $$$$ >> "$1"; read x < "$2"' sh "$1" "$2" </dev/null >/dev/null 2>&1 &)
done
trap 'exit 0' TERM
echo ready
while :; do sleep 0.02; done`

// TestOrphansReaped: orphans re-parented to gpuguard (a child subreaper)
// are reaped when they exit: none is left a zombie.
func TestOrphansReaped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pol := e.policy(pfPolicy)
	pids, fifo := e.path("orphans"), e.path("fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// GPUGUARD_CGROUP=off: the orphans must outlive nothing but their
	// parents, and the cgroup would not change what is tested here.
	p := e.start(append([]string{"run", "--policy", pol, "--name", "orph"}, sh(pfOrphans, pids, fifo)...), "GPUGUARD_CGROUP=off")
	p.expect("ready")
	gg := p.cmd.Process.Pid
	var orphans []int
	pfEventually(10*time.Second, func() bool { orphans = pfIntLines(pids); return len(orphans) == 5 })
	if len(orphans) != 5 {
		t.Fatalf("orphans: %v", orphans)
	}
	pfKill(t, orphans...)
	for _, o := range orphans {
		if !pfEventually(10*time.Second, func() bool { st, _ := pfReadStat(o); return st.ppid == gg }) {
			t.Fatalf("orphan %d was not re-parented to gpuguard", o)
		}
	}
	// Let them all exit: each reader sees EOF once the writer closes.
	for range orphans {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		if pfEventually(5*time.Second, func() bool { return pfAllGone(orphans) }) {
			break
		}
	}
	if !pfEventually(10*time.Second, func() bool { return pfAllGone(orphans) }) {
		t.Fatalf("orphans left (zombies: %d)", pfZombies(gg))
	}
	p.signal(syscall.SIGTERM)
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, p.stderr.String())
	}
}

// TestOrphansReapedAsPID1: gpuguard as PID 1 of a pid namespace (as in a
// container without an init) reaps the orphans that land on it. The check
// runs inside the namespace, in the child: the orphans' pids must vanish
// from /proc, which a zombie never does.
func TestOrphansReapedAsPID1(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root for a pid namespace")
	}
	if err := exec.Command("unshare", "--pid", "--fork", "--mount-proc", "true").Run(); err != nil {
		t.Skipf("cannot make a pid namespace here: %v", err)
	}
	e := newEnv(t)
	pol := e.policy(pfPolicy + "on_crash = false\n")
	script := `[ $PPID -eq 1 ] || echo "not in a new pid namespace: parent $PPID"
for i in 1 2 3 4 5; do (setsid sh -c 'echo $$$$ >> "$1"' sh "$1" &); done
i=0; while [ $i -lt 500 ]; do
  n=0; for p in $(cat "$1" 2>/dev/null); do [ -e /proc/$p ] && n=$((n+1)); done
  [ "$(wc -l < "$1")" -eq 5 ] && [ $n -eq 0 ] && { echo reaped; exit 0; }
  sleep 0.01; i=$((i+1))
done
echo "left: $n of $(cat "$1")"; grep -l 'State:.*Z' /proc/[0-9]*/status; exit 1`
	args := append([]string{"unshare", "--pid", "--fork", "--mount-proc", bin,
		"run", "--state-dir", e.stateDir, "--runtime-dir", e.runDir, "--policy", pol, "--name", "pid1"}, sh(script, e.path("orphans"))...)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0", "GPUGUARD_CGROUP=off")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "reaped") || strings.Contains(string(out), "not in a new pid namespace") {
		t.Fatalf("%v:\n%s", err, out)
	}
}

// pfIntLines reads a file of one integer a line.
func pfIntLines(path string) []int {
	var out []int
	for _, l := range pfLines(path) {
		if n, err := strconv.Atoi(strings.TrimSpace(l)); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// pfAllGone reports whether none of pids exists any more, not even as a
// zombie.
func pfAllGone(pids []int) bool {
	for _, p := range pids {
		if _, err := os.Stat("/proc/" + strconv.Itoa(p)); err == nil {
			return false
		}
	}
	return true
}
