package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pfPolicy is a one-profile policy on the simulated GPU with fast timers.
const pfPolicy = `
[watch]
backend = "sim"
interval = "200ms"
[restart]
backoff = "1ms"
backoff_max = "1ms"
stop_timeout = "5s"
release_timeout = "1s"
`

// TestKill9 SIGKILLs gpuguard while it runs a child that has a grandchild
// in its process group, again and again under the same name. Every time:
// the child dies (Pdeathsig); the next run with the same name starts at
// once (the kernel released the flock; the stale socket is reclaimed) and
// answers on its socket. The grandchild is not covered by Pdeathsig: with
// a cgroup per child the next run kills it before starting its own child;
// with process groups only it survives, which the test records (see
// docs/reliability.md). GPUGUARD_SOAK=1: 200 rounds per mode.
func TestKill9(t *testing.T) {
	t.Parallel()
	rounds := pfSize("KILL9", 10, 200)
	for _, mode := range pfModes(t) {
		t.Run(mode.name, func(t *testing.T) {
			e := newEnv(t)
			pol := e.policy(pfPolicy)
			// The grandchild's stdio goes to /dev/null: the harness reads
			// gpuguard's stdout to EOF, and a surviving grandchild would
			// hold it open.
			script := `sleep 1000 </dev/null >/dev/null 2>&1 &
echo "child=$$$$ gc=$!"
wait`
			args := append([]string{"run", "--policy", pol, "--name", "k9"}, sh(script)...)
			var survivedKill, survivedNext int
			prevGC := 0
			start := time.Now()
			for i := range rounds {
				p := e.start(args, mode.env...)
				f := pfFields(t, p.expect("child="))
				child, gc := f["child"], f["gc"]
				pfKill(t, child, gc)
				if mode.cgroup && !pfInChildCgroup(child) {
					t.Fatalf("round %d: child not in a cgroup of its own: %q", i, pfCgroup(child))
				}
				if prevGC != 0 {
					// This run started a child, so it did any cleanup it
					// does before that.
					if pfAlive(prevGC) {
						survivedNext++
						syscall.Kill(prevGC, syscall.SIGKILL)
					}
				}
				if i == 0 || i == rounds-1 || pfSoak() {
					pfCheckStatus(t, e, p.cmd.Process.Pid)
				}
				if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				if code := p.wait(); code != 128+int(syscall.SIGKILL) {
					t.Fatalf("round %d: gpuguard exit %d, want 137", i, code)
				}
				if !pfGone(child, 10*time.Second) {
					t.Fatalf("round %d: child %d outlived gpuguard's SIGKILL (Pdeathsig)", i, child)
				}
				if pfAlive(gc) {
					survivedKill++
				}
				prevGC = gc
			}
			// A clean last run: it starts, and ends on SIGTERM.
			p := e.start(append([]string{"run", "--policy", pol, "--name", "k9"}, sh("trap 'exit 0' TERM; echo up; while :; do sleep 0.05; done")...), mode.env...)
			p.expect("up")
			if prevGC != 0 && pfAlive(prevGC) {
				survivedNext++
				syscall.Kill(prevGC, syscall.SIGKILL)
			}
			p.signal(syscall.SIGTERM)
			if code := p.wait(); code != 0 {
				t.Fatalf("last run: exit %d; stderr:\n%s", code, p.stderr.String())
			}
			t.Logf("mode %s: %d rounds of kill -9 in %s: children left 0, grandchildren alive right after the kill %d, still alive once the next run started %d, lock or socket failures 0",
				mode.name, rounds, time.Since(start).Round(time.Millisecond), survivedKill, survivedNext)
			if mode.cgroup && survivedNext != 0 {
				t.Errorf("cgroup mode: %d grandchildren outlived the next run's start", survivedNext)
			}
		})
	}
}

// pfCheckStatus asks the running instance k9 for its status over the
// socket and checks that it is the gpuguard with pid.
func pfCheckStatus(t *testing.T, e *env, pid int) {
	t.Helper()
	// Not e.run: its reader of stdout races with cmd.Wait, which closes
	// the pipe, and a short-lived command's output is sometimes lost.
	cmd := exec.Command(bin, "status", "k9", "--json", "--runtime-dir", e.runDir)
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	var outb, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &outb, &errb
	code := exitCode(cmd.Run())
	out, stderr := outb.String(), errb.String()
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, stderr)
	}
	var st struct {
		Instances []struct {
			PID   int    `json:"pid"`
			State string `json:"state"`
		} `json:"instances"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status --json: %v: stdout %q, stderr %q", err, out, stderr)
	}
	if len(st.Instances) != 1 || st.Instances[0].PID != pid || strings.Contains(st.Instances[0].State, "unreachable") {
		t.Fatalf("status after a kill -9: %s (want pid %d)", out, pid)
	}
}
