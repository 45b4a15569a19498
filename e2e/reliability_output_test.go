package e2e

import (
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestGrandchildHoldingOutput: the child leaves a grandchild outside its
// process group (setsid) that holds stdout and stderr open, then exits 3.
// gpuguard must still end, with 3, within the 1 s stderr drain (plus
// start-up): it never waits for output that a stray process holds. With a
// cgroup per child the grandchild is killed too and gpuguard's own stdout
// and stderr reach EOF; with process groups only, the grandchild survives
// gpuguard (docs/reliability.md).
//
// gpuguard runs outside the harness here: the harness reads gpuguard's
// stdout to EOF, which the surviving grandchild would withhold.
func TestGrandchildHoldingOutput(t *testing.T) {
	t.Parallel()
	for _, mode := range pfModes(t) {
		for _, scan := range []bool{true, false} {
			t.Run(mode.name+"/scan_stderr="+strconv.FormatBool(scan), func(t *testing.T) {
				pfHoldOutput(t, mode, scan)
			})
		}
	}
}

func pfHoldOutput(t *testing.T, mode pfMode, scan bool) {
	e := newEnv(t)
	pol := e.policy(pfPolicy + "on_crash = false\n[oom]\nscan_stderr = " + strconv.FormatBool(scan) + "\n")
	pidFile := e.path("gc")
	script := `setsid sh -c 'echo grandchild-out; echo grandchild-err >&2; echo $$$$ > "$1.tmp"; mv "$1.tmp" "$1"; exec sleep 1000' sh "$1" &
while [ ! -s "$1" ]; do sleep 0.01; done
exit 3`
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"run", "--state-dir", e.stateDir, "--runtime-dir", e.runDir, "--policy", pol, "--name", "hold"}, sh(script, pidFile)...)
	cmd := exec.Command(bin, args...)
	cmd.Dir = e.dir
	cmd.Env = append(append(os.Environ(), "GORACE=atexit_sleep_ms=0"), mode.env...)
	cmd.Stdout, cmd.Stderr = outW, errW // files: Wait does not wait for copying
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	outW.Close()
	errW.Close()
	outEOF, errEOF := pfReadAll(outR), pfReadAll(errR)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var werr error
	select {
	case werr = <-exited:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-exited
		t.Fatal("gpuguard hung on output a grandchild holds")
	}
	took := time.Since(t0)
	gc := 0
	if b, err := os.ReadFile(pidFile); err == nil {
		gc, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	if gc == 0 {
		t.Fatal("the grandchild never started")
	}
	pfKill(t, gc)
	if code := exitCode(werr); code != 3 {
		t.Fatalf("exit %d, want 3", code)
	}
	t.Logf("gpuguard ended %s after its start", took.Round(time.Millisecond))
	if mode.cgroup {
		if !pfGone(gc, 5*time.Second) {
			t.Fatalf("cgroup mode: grandchild %d survived", gc)
		}
		for name, ch := range map[string]<-chan string{"stdout": outEOF, "stderr": errEOF} {
			select {
			case s := <-ch:
				if want := "grandchild-" + name[3:]; !strings.Contains(s, want) {
					t.Errorf("%s lacks %q: %q", name, want, s)
				}
			case <-time.After(10 * time.Second):
				t.Errorf("%s not at EOF though the grandchild is dead", name)
			}
		}
		return
	}
	if !pfAlive(gc) {
		t.Fatal("process-group mode: the grandchild died; the test proves nothing")
	}
	pfKill(t, gc)
}

// pfReadAll reads r to EOF on a goroutine and delivers what it read.
func pfReadAll(r *os.File) <-chan string {
	ch := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(r)
		r.Close()
		ch <- string(b)
	}()
	return ch
}
