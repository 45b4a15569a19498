package e2e

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pfSignalPolicy is pfPolicy with the given stop_timeout and backoff.
func pfSignalPolicy(stopTimeout, backoff string) string {
	return fmt.Sprintf(`
[watch]
backend = "sim"
interval = "200ms"
[restart]
backoff = %q
backoff_max = %q
stop_timeout = %q
release_timeout = "1s"
`, backoff, backoff, stopTimeout)
}

// pfTrapAll is a child that appends the name of every signal it gets to
// $1 and keeps running.
const pfTrapAll = `for s in TERM INT HUP URG USR1; do trap "echo $s >> \"\$1\"" $s; done
echo ready
while :; do sleep 0.02; done`

// pfLines reads a file as lines; a missing file has none.
func pfLines(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\n"), "\n")
}

// TestStopSignalForwardedOnce: TERM, INT and HUP sent to gpuguard reach
// the child exactly once, SIGURG sent to gpuguard never does, and a child
// that ignores the stop is SIGKILLed with its group after stop_timeout:
// gpuguard exits 137.
func TestStopSignalForwardedOnce(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		name := strings.TrimPrefix(pfSigName(sig), "SIG")
		t.Run(name, func(t *testing.T) {
			t.Parallel() // each waits out its stop_timeout
			e := newEnv(t)
			// stop_timeout is how long the child's shell has to run its
			// trap (after its current sleep) before the SIGKILL: 3 s, not
			// less, on a loaded machine.
			pol := e.policy(pfSignalPolicy("3s", "1ms"))
			got := e.path("signals")
			p := e.start(append([]string{"run", "--policy", pol, "--name", "sig"}, sh(pfTrapAll, got)...))
			p.expect("ready")
			for range 5 {
				p.signal(syscall.SIGURG)
			}
			t0 := time.Now()
			p.signal(sig)
			if code := p.wait(); code != 128+int(syscall.SIGKILL) {
				t.Fatalf("exit %d, want 137 (the child kept running); stderr:\n%s", code, p.stderr.String())
			}
			if took := time.Since(t0); took < 3*time.Second {
				t.Errorf("killed after %s, before stop_timeout", took)
			}
			if lines := pfLines(got); len(lines) != 1 || lines[0] != name {
				t.Fatalf("the child got %q, want exactly one %s (and never URG)", lines, name)
			}
		})
	}
}

// TestSecondInterruptKills: a second Ctrl-C does not wait for stop_timeout
// (60 s here): it kills the group at once. The child saw one SIGINT.
func TestSecondInterruptKills(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pol := e.policy(pfSignalPolicy("60s", "1ms"))
	got := e.path("signals")
	p := e.start(append([]string{"run", "--policy", pol, "--name", "int2"}, sh(pfTrapAll, got)...))
	p.expect("ready")
	t0 := time.Now()
	p.signal(syscall.SIGINT)
	if !pfEventually(10*time.Second, func() bool { return len(pfLines(got)) > 0 }) {
		t.Fatal("the first SIGINT never reached the child")
	}
	p.signal(syscall.SIGINT)
	if code := p.wait(); code != 128+int(syscall.SIGKILL) {
		t.Fatalf("exit %d, want 137; stderr:\n%s", code, p.stderr.String())
	}
	if took := time.Since(t0); took > 30*time.Second {
		t.Errorf("the second SIGINT took %s to kill", took)
	}
	if lines := pfLines(got); len(lines) != 1 || lines[0] != "INT" {
		t.Errorf("the child got %q, want one INT", lines)
	}
}

// TestChildIgnoringTermIsKilled: SIG_IGN for SIGTERM (no trap to run at
// all) ends in SIGKILL after stop_timeout, exit 137.
func TestChildIgnoringTermIsKilled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pol := e.policy(pfSignalPolicy("300ms", "1ms"))
	p := e.start(append([]string{"run", "--policy", pol, "--name", "ign"}, sh(`trap '' TERM; echo ready; while :; do sleep 0.02; done`)...))
	p.expect("ready")
	t0 := time.Now()
	p.signal(syscall.SIGTERM)
	if code := p.wait(); code != 137 {
		t.Fatalf("exit %d, want 137; stderr:\n%s", code, p.stderr.String())
	}
	if took := time.Since(t0); took < 300*time.Millisecond {
		t.Errorf("killed after %s, before stop_timeout", took)
	}
}

// TestChildExitingZeroOnTerm: a child that exits 0 on SIGTERM makes
// gpuguard exit 0, without waiting for stop_timeout (30 s here).
func TestChildExitingZeroOnTerm(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pol := e.policy(pfSignalPolicy("30s", "1ms"))
	p := e.start(append([]string{"run", "--policy", pol, "--name", "zero"}, sh(`trap 'exit 0' TERM; echo ready; while :; do sleep 0.02; done`)...))
	p.expect("ready")
	t0 := time.Now()
	p.signal(syscall.SIGTERM)
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d, want 0; stderr:\n%s", code, p.stderr.String())
	}
	if took := time.Since(t0); took > 10*time.Second {
		t.Errorf("took %s", took)
	}
}

// TestStopDuringBackoff: a stop signal while no child runs (it crashed and
// the next start is 30 s away) ends gpuguard at once with 128+signal.
func TestStopDuringBackoff(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		t.Run(strings.TrimPrefix(pfSigName(sig), "SIG"), func(t *testing.T) {
			e := newEnv(t)
			pol := e.policy(pfSignalPolicy("5s", "30s"))
			p := e.start(append([]string{"run", "--policy", pol, "--name", "bo"}, sh(`echo started; exit 1`)...))
			p.expect("started")
			if !pfEventually(10*time.Second, func() bool { return strings.Contains(p.stderr.String(), "child exited with status 1") }) {
				t.Fatalf("no exit logged; stderr:\n%s", p.stderr.String())
			}
			t0 := time.Now()
			p.signal(sig)
			if code := p.wait(); code != 128+int(sig) {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, 128+int(sig), p.stderr.String())
			}
			if took := time.Since(t0); took > 10*time.Second {
				t.Errorf("took %s: the backoff was waited for", took)
			}
		})
	}
}

func pfSigName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGHUP:
		return "SIGHUP"
	}
	return sig.String()
}

// pfSlowTerm is a child that, on SIGTERM, appends TERM to $1 and takes its
// time to clean up: it exits 0 once the file $2 exists. A second SIGTERM
// makes it exit 134 at once, as llama-server aborts on one.
const pfSlowTerm = `trap 'echo TERM >> "$1"; n=$(wc -l < "$1"); [ "$n" -gt 1 ] && exit 134' TERM
echo "ready $GPUGUARD_PROFILE"
while :; do
	if [ -s "$1" ] && [ -e "$2" ]; then exit 0; fi
	sleep 0.02
done`

// TestStopDuringAStepSignalsOnce: an operator's SIGTERM that arrives while
// gpuguard is already stopping the child for a step (its restart one
// profile lower) is not forwarded again: the child, mid-cleanup, gets one
// SIGTERM, and gpuguard ends with the child's exit (0) instead of
// restarting it.
func TestStopDuringAStepSignalsOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pol := e.policy(pfSignalPolicy("30s", "1ms") + `
[[profile]]
name = "big"
[[profile]]
name = "small"
`)
	got, clean := e.path("signals"), e.path("clean")
	p := e.start(append([]string{"run", "--policy", pol, "--name", "steps"}, sh(pfSlowTerm, got, clean)...))
	p.expect("ready big")
	step := e.start([]string{"step", "steps", "down", "--runtime-dir", e.runDir}) // answers once the step is done: never, here
	if !pfEventually(20*time.Second, func() bool { return len(pfLines(got)) > 0 }) {
		t.Fatal("the step's SIGTERM never reached the child")
	}
	p.signal(syscall.SIGTERM)
	if !pfEventually(20*time.Second, func() bool { return strings.Contains(p.stderr.String(), "the child already has it") }) {
		t.Fatalf("gpuguard did not take the stop; stderr:\n%s", p.stderr.String())
	}
	if err := os.WriteFile(clean, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != 0 {
		t.Errorf("exit %d, want 0 (the child's own, after one SIGTERM); stderr:\n%s", code, p.stderr.String())
	}
	if lines := pfLines(got); len(lines) != 1 {
		t.Errorf("the child got %q, want exactly one TERM", lines)
	}
	if code := step.wait(); code == 0 {
		t.Errorf("gpuguard step: exit 0 for a step the stop cut short, want an error")
	}
	if strings.Contains(p.stderr.String(), "in profile small (pid") {
		t.Errorf("the child was restarted after the operator's stop; stderr:\n%s", p.stderr.String())
	}
}
