package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/internal/testbin"
)

// startStderrPipe is e.start with gpuguard's stderr on a pipe whose read
// end the test holds: closing it is the reader dying (`| tee` killed, a
// terminal closed). The lines read while it lives are sent on errLines.
func startStderrPipe(e *env, args []string) (p *proc, errR *os.File, errLines chan string) {
	e.t.Helper()
	args = append([]string{"run", "--state-dir", e.stateDir, "--runtime-dir", e.runDir}, args[1:]...)
	cmd := exec.Command(bin, args...)
	cmd.Dir = e.dir
	cmd.Env = append(os.Environ(), "OUT="+e.path("out"), "GORACE=atexit_sleep_ms=0")
	outR, outW, err := os.Pipe()
	if err != nil {
		e.t.Fatal(err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		e.t.Fatal(err)
	}
	p = &proc{t: e.t, cmd: cmd, lines: make(chan string, 1000), stderr: &testbin.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = outW, errW
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	outW.Close()
	errW.Close()
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		outR.Close()
		close(p.lines)
	}()
	errLines = make(chan string, 10000)
	go func() {
		sc := bufio.NewScanner(errR)
		for sc.Scan() {
			select {
			case errLines <- sc.Text():
			default:
			}
		}
	}()
	go func() {
		p.code = exitCode(cmd.Wait())
		close(p.done)
	}()
	e.t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p, errR, errLines
}

// noisyChild writes to stderr all the time (so gpuguard's passthrough
// meets the dead reader), reports notifications, makes an OOM exit when
// $OUT.oom appears, and on SIGINT drains for half a second and exits 5.
const noisyChild = `trap 'echo "notified $(cat "$GPUGUARD_STATE")"' USR1
trap 'sleep 0.5; echo drained; exit 5' INT
echo "up $GPUGUARD_PROFILE $GPUGUARD_LAST_EXIT"
while :; do
  echo noise >&2
  if [ -e "$OUT.oom" ]; then rm -f "$OUT.oom"; echo "CUDA out of memory" >&2; exit 1; fi
  sleep 0.05
done
`

// TestStderrReaderDies: gpuguard's stderr goes to a reader that dies
// (`gpuguard run ... 2>&1 | tee log`, then tee is killed). A step, an OOM
// restart (found in the child's stderr, which gpuguard still scans) and a
// Ctrl-C stop all behave as with a terminal: the child drains and exits,
// and gpuguard exits with the child's status: the next write to the dead
// pipe must not raise SIGPIPE, which would kill gpuguard with 141, cut the
// child's drain short and leave its socket behind.
func TestStderrReaderDies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pol := e.policy(ladder)
	addr := freeLoopbackAddr(t)
	p, errR, errLines := startStderrPipe(e, append([]string{"run", "--policy", pol, "--name", "pipe", "--metrics-addr", addr}, sh(noisyChild)...))
	p.expect("up fp16 none")
	// The passthrough works while the reader lives.
	waitFor(t, "the child's stderr passed through", 30*time.Second, func() bool {
		for {
			select {
			case l := <-errLines:
				if l == "noise" {
					return true
				}
			default:
				return false
			}
		}
	})
	errR.Close() // the reader dies
	step := func(dir, want string) {
		t.Helper()
		code, out, stderr := e.run([]string{"step", "pipe", dir, "--runtime-dir", e.runDir})
		if code != 0 || strings.TrimSpace(out) != want {
			t.Fatalf("step %s: exit %d, %q, %s", dir, code, out, stderr)
		}
	}
	step("down", "int8")
	l := p.expect("notified ")
	var st struct {
		Level int `json:"level"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(l, "notified ")), &st); err != nil || st.Level != 1 {
		t.Fatalf("notified %q, want level 1", l)
	}
	if err := os.WriteFile(e.path("out.oom"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p.expect("up int4 oom")
	waitFor(t, "the dropped lines counted", 30*time.Second, func() bool {
		return pfMetric(t, addr, "gpuguard_output_dropped_total") > 0
	})
	p.signal(syscall.SIGINT)
	p.expect("drained")
	if code := p.wait(); code != 5 {
		t.Fatalf("exit %d, want the child's 5", code)
	}
	if _, err := os.Stat(e.path("run/pipe.sock")); err == nil {
		t.Error("the socket was left behind")
	}
}
