package proc

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func sh(script string) Spec {
	return Spec{Argv: []string{"/bin/sh", "-c", script}}
}

func TestExitCode(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 3, 42, 255} {
		c := start(t, sh("exit "+strconv.Itoa(n)))
		e := wait(t, c)
		if e.Code != n || e.Signal != 0 || e.Status() != n {
			t.Errorf("exit %d: got %+v, status %d", n, e, e.Status())
		}
	}
}

func TestKilledBySignal(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL, syscall.SIGSEGV} {
		c := start(t, sh("kill -"+strconv.Itoa(int(sig))+" $$"))
		e := wait(t, c)
		if e.Code != -1 || e.Signal != sig || e.Status() != 128+int(sig) {
			t.Errorf("%v: got %+v, status %d", sig, e, e.Status())
		}
	}
}

func TestStderrPassthroughAndTail(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ n, tailSize, want int }{
		{n: 200_000, want: DefaultTailSize},
		{n: 1000, want: 1000},
		{n: 0, want: 0},
		{n: 5000, tailSize: 100, want: 100},
	} {
		var pass bytes.Buffer
		spec := helperSpec(t, "stderr", strconv.Itoa(tc.n))
		spec.ScanStderr, spec.Stderr, spec.TailSize = true, &pass, tc.tailSize
		e := wait(t, start(t, spec))
		data := testData(tc.n)
		if !bytes.Equal(pass.Bytes(), data) {
			t.Errorf("n=%d: pass-through differs: got %d bytes", tc.n, pass.Len())
		}
		if !bytes.Equal(e.Stderr, data[tc.n-tc.want:]) {
			t.Errorf("n=%d: tail is %d bytes, not the last %d", tc.n, len(e.Stderr), tc.want)
		}
		if e.Stderr == nil {
			t.Errorf("n=%d: scanned stderr is nil", tc.n)
		}
	}
}

func TestFilesAreHandedOverWithoutPipes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out, err := os.Create(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	errf, err := os.Create(filepath.Join(dir, "err"))
	if err != nil {
		t.Fatal(err)
	}
	defer errf.Close()
	spec := helperSpec(t, "fds")
	spec.Stdout, spec.Stderr = out, errf
	e := wait(t, start(t, spec))
	if e.Stderr != nil {
		t.Errorf("unscanned stderr kept: %q", e.Stderr)
	}
	for f, want := range map[*os.File]string{out: "stdout=" + out.Name() + "\n", errf: "stderr=" + errf.Name() + "\n"} {
		got, _ := os.ReadFile(f.Name())
		if string(got) != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

func TestScannedStderrIsAPipe(t *testing.T) {
	t.Parallel()
	errf, err := os.Create(filepath.Join(t.TempDir(), "err"))
	if err != nil {
		t.Fatal(err)
	}
	defer errf.Close()
	spec := helperSpec(t, "fds")
	spec.Stderr, spec.ScanStderr, spec.Stdout = errf, true, io.Discard
	e := wait(t, start(t, spec))
	got, _ := os.ReadFile(errf.Name())
	if !strings.HasPrefix(string(got), "stderr=pipe:") || !bytes.Equal(got, e.Stderr) {
		t.Errorf("file %q, tail %q", got, e.Stderr)
	}
}

func TestDrainStopsWhenEscapedGrandchildHoldsStderr(t *testing.T) {
	t.Parallel()
	out := newLines()
	spec := helperSpec(t, "escape")
	spec.ScanStderr, spec.Stderr, spec.Stdout = true, new(bytes.Buffer), out
	spec.DrainTimeout = 100 * 1e6
	c := start(t, spec)
	gc := out.nextPID(t)
	killOnCleanup(t, gc)
	e := wait(t, c)
	if e.Status() != 3 {
		t.Errorf("status %d, want 3", e.Status())
	}
	if !alive(gc) {
		t.Error("the grandchild did not outlive the drain; the test proves nothing")
	}
}

func TestGroupKilledAfterMainExits(t *testing.T) {
	t.Parallel()
	out := newLines()
	spec := sh("sleep 1000 & echo $!")
	spec.Stdout = out
	c := start(t, spec)
	gc := out.nextPID(t)
	if e := wait(t, c); e.Status() != 0 {
		t.Errorf("status %d, want 0", e.Status())
	}
	waitGone(t, gc)
}

func TestOwnProcessGroup(t *testing.T) {
	t.Parallel()
	out := newLines()
	spec := helperSpec(t, "pong")
	spec.Stdout = out
	c := start(t, spec)
	out.next(t)
	if pgid, err := unix.Getpgid(c.PID()); err != nil || pgid != c.PID() {
		t.Errorf("pgid %d (%v), want %d", pgid, err, c.PID())
	}
}

func TestSignalReachesMainOnly(t *testing.T) {
	t.Parallel()
	// The grandchild would die of SIGUSR1; the main process kills it with
	// SIGTERM and reports how it died.
	out := newLines()
	spec := sh(`trap 'kill -TERM $gc; wait $gc; echo "gc=$?"; exit 0' USR1
sleep 1000 & gc=$!
echo ready
wait`)
	spec.Stdout, spec.Stderr = out, io.Discard // dash reports the job it killed
	c := start(t, spec)
	if s := out.next(t); s != "ready" {
		t.Fatalf("got %q", s)
	}
	if err := c.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	if s := out.next(t); s != "gc=143" {
		t.Errorf("grandchild: %s, want gc=143 (killed by the SIGTERM only)", s)
	}
	if e := wait(t, c); e.Status() != 0 {
		t.Errorf("status %d", e.Status())
	}
	if err := c.Signal(syscall.SIGTERM); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("signal after exit: %v", err)
	}
}

func TestKillKillsGroup(t *testing.T) {
	t.Parallel()
	out := newLines()
	spec := sh(`trap '' TERM; sleep 1000 & echo $!; wait`)
	spec.Stdout, spec.Stderr = out, io.Discard // dash reports the job it killed
	c := start(t, spec)
	gc := out.nextPID(t)
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	if e := wait(t, c); e.Signal != syscall.SIGKILL {
		t.Errorf("got %+v, want killed by SIGKILL", e)
	}
	waitGone(t, gc)
	if err := c.Kill(); err != nil {
		t.Errorf("kill after exit: %v", err)
	}
}

func TestSIGURGRefused(t *testing.T) {
	t.Parallel()
	out := newLines()
	spec := helperSpec(t, "pong")
	spec.Stdout = out
	c := start(t, spec)
	out.next(t)
	if err := c.Signal(syscall.SIGURG); !errors.Is(err, ErrSIGURG) {
		t.Errorf("SIGURG: %v", err)
	}
	if err := c.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if e := wait(t, c); e.Status() != 0 {
		t.Errorf("status %d", e.Status())
	}
}

func TestArgvIsNotShellInterpreted(t *testing.T) {
	t.Parallel()
	args := []string{"a b", `"quoted"`, "'single'", "$HOME", "${HOME}", "`id`", "$(id)", "; exit 9", "*", "", `\n`, "a\nb"}
	var out bytes.Buffer
	spec := helperSpec(t, "args", args...)
	spec.Stdout = &out
	wait(t, start(t, spec))
	var got []string
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v: %q", err, out.Bytes())
	}
	if !slices.Equal(got, args) {
		t.Errorf("got %q, want %q", got, args)
	}
}

func TestDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var out bytes.Buffer
	spec := Spec{Argv: []string{"pwd"}, Dir: dir, Stdout: &out}
	wait(t, start(t, spec))
	if got := strings.TrimSpace(out.String()); got != dir {
		t.Errorf("pwd %q, want %q", got, dir)
	}
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	write := func(name, text string, mode os.FileMode) string {
		p := filepath.Join(bin, name)
		if err := os.WriteFile(p, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	notExec := write("notexec", "#!/bin/sh\n", 0o644)
	badInterp := write("badinterp", "#!/nonexistent/interpreter\n", 0o755)
	noShebang := write("noshebang", "echo hi\n", 0o755)
	if err := os.Mkdir(filepath.Join(bin, "adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		spec Spec
		is   []error
		text string
	}{
		{"no argv", Spec{}, nil, "no command"},
		{"not in PATH", Spec{Argv: []string{"gpuguard-no-such-cmd"}, Env: []string{"PATH=/nonexistent:" + bin}},
			[]error{ErrNotFound, exec.ErrNotFound}, `cannot run "gpuguard-no-such-cmd": command not found in PATH=/nonexistent:` + bin},
		{"in gpuguard's PATH only", Spec{Argv: []string{"sh"}, Env: []string{"PATH=" + bin}}, []error{ErrNotFound}, bin},
		{"PATH unset", Spec{Argv: []string{"sh"}, Env: []string{"HOME=/"}}, []error{ErrNotFound}, "PATH is not set"},
		{"not executable in PATH", Spec{Argv: []string{"notexec"}, Env: []string{"PATH=/nonexistent:" + bin}},
			[]error{ErrCannotExecute}, notExec + " is not executable (mode -rw-r--r--)"},
		{"directory in PATH", Spec{Argv: []string{"adir"}, Env: []string{"PATH=" + bin}}, []error{ErrCannotExecute}, "is a directory"},
		{"relative PATH entry", Spec{Argv: []string{"gg-relative"}, Env: []string{"PATH=/nonexistent:testdata/bin"}},
			[]error{ErrCannotExecute, exec.ErrDot}, "testdata/bin/gg-relative"},
		{"missing absolute", Spec{Argv: []string{"/nonexistent/gpuguard-cmd"}}, []error{ErrNotFound, fs.ErrNotExist}, "/nonexistent/gpuguard-cmd"},
		{"not executable by path", Spec{Argv: []string{notExec}}, []error{ErrCannotExecute}, "is not executable"},
		{"directory by path", Spec{Argv: []string{bin}}, []error{ErrCannotExecute}, bin + " is a directory"},
		{"bad interpreter", Spec{Argv: []string{badInterp}}, []error{ErrCannotExecute, syscall.ENOENT}, "interpreter"},
		{"exec format error", Spec{Argv: []string{noShebang}}, []error{ErrCannotExecute, syscall.ENOEXEC}, "exec format error"},
		{"missing dir", Spec{Argv: []string{"/bin/true"}, Dir: "/nonexistent"}, []error{fs.ErrNotExist}, "/nonexistent"},
	} {
		c, err := Start(tc.spec)
		if err == nil {
			c.Kill()
			<-c.Done()
			t.Errorf("%s: started", tc.name)
			continue
		}
		for _, is := range tc.is {
			if !errors.Is(err, is) {
				t.Errorf("%s: %v is not %v", tc.name, err, is)
			}
		}
		if !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%s: %q does not mention %q", tc.name, err, tc.text)
		}
		// Check sees what Start sees before the exec; only the kernel
		// reads the file's first bytes.
		cerr := Check(tc.spec)
		if onlyExec := tc.name == "bad interpreter" || tc.name == "exec format error"; onlyExec {
			if cerr != nil {
				t.Errorf("%s: Check says %v, want nil (only the exec can tell)", tc.name, cerr)
			}
		} else if cerr == nil || cerr.Error() != err.Error() {
			t.Errorf("%s: Check says %v, Start %v", tc.name, cerr, err)
		}
	}
}

// TestPATHSkipsNonExecutable: as execvp does, the search goes on past an
// entry that cannot be executed.
func TestPATHSkipsNonExecutable(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "sh"), []byte("#!/bin/sh\necho wrong\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	spec := Spec{Argv: []string{"sh", "-c", "echo ok"}, Env: []string{"PATH=" + bin + ":/bin:/usr/bin"}, Stdout: &out}
	wait(t, start(t, spec))
	if out.String() != "ok\n" {
		t.Errorf("got %q", out.String())
	}
}

func TestPATHOfChildEnv(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "gg-tool"), []byte("#!/bin/sh\necho found \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	spec := Spec{Argv: []string{"gg-tool", "x"}, Env: []string{"PATH=/nonexistent::" + bin}, Stdout: &out}
	wait(t, start(t, spec))
	if out.String() != "found x\n" {
		t.Errorf("got %q", out.String())
	}
}

// TestPdeathsig checks that the child dies with gpuguard: a helper starts a
// child through Start and exits without stopping it.
func TestPdeathsig(t *testing.T) {
	t.Parallel()
	out := newLines()
	spec := helperSpec(t, "orphan")
	spec.Stdout = out
	c := start(t, spec)
	orphan := out.nextPID(t)
	killOnCleanup(t, orphan)
	wait(t, c)
	waitGone(t, orphan)
}

// TestChildSurvivesThreadExits retires OS threads while a child runs:
// Pdeathsig would kill the child if the thread that forked it were one of
// them (golang/go#27505).
func TestChildSurvivesThreadExits(t *testing.T) {
	t.Parallel()
	out := newLines()
	spec := helperSpec(t, "pong")
	spec.Stdout = out
	c := start(t, spec)
	out.next(t)
	var wg sync.WaitGroup
	for range 4 * runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			runtime.LockOSThread() // returning locked retires the thread
		})
	}
	wg.Wait()
	if err := c.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-out.ch:
		if s != "pong" {
			t.Fatalf("got %q", s)
		}
	case <-c.Done():
		t.Fatalf("child died: %+v", c.Exit())
	}
	c.Signal(syscall.SIGTERM)
	if e := wait(t, c); e.Status() != 0 {
		t.Errorf("status %d", e.Status())
	}
}

// TestStderrScannedAfterItsReaderDies: gpuguard's stderr is a pipe whose
// reader is gone (a killed `tee`). The child's stderr is passed through
// while the reader lives, and after that still read to the end and kept
// for the OOM scan: the child is never blocked on a full pipe, and its
// last words reach Exit.Stderr.
func TestStderrScannedAfterItsReaderDies(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	spec := sh(`echo first >&2; read x < "$0"; i=0; while [ $i -lt 2000 ]; do echo "line $i of noise to fill a pipe" >&2; i=$((i+1)); done; echo "CUDA out of memory" >&2; exit 1`)
	gate := filepath.Join(t.TempDir(), "gate")
	if err := syscall.Mkfifo(gate, 0o600); err != nil {
		t.Fatal(err)
	}
	spec.Argv = append(spec.Argv, gate)
	spec.ScanStderr, spec.Stderr = true, w
	c := start(t, spec)
	buf := make([]byte, 64)
	if n, err := r.Read(buf); err != nil || !strings.Contains(string(buf[:n]), "first") {
		t.Fatalf("passthrough while the reader lives: %q, %v", buf[:n], err)
	}
	r.Close() // the reader dies
	g, err := os.OpenFile(gate, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	g.Write([]byte("go\n"))
	g.Close()
	e := wait(t, c)
	if e.Code != 1 || !strings.HasSuffix(string(e.Stderr), "CUDA out of memory\n") {
		t.Fatalf("exit %+v, stderr tail ends %q; want code 1 and the OOM line", e.Code, pfx(e.Stderr))
	}
}

func pfx(b []byte) string {
	if len(b) > 60 {
		b = b[len(b)-60:]
	}
	return string(b)
}

// TestWaitExitedPolled: the wait for a child's exit in the poller returns
// once it has exited and leaves it unreaped (a zombie, whose pid, and so
// group id, cannot be reused), for Wait to take its status.
func TestWaitExitedPolled(t *testing.T) {
	cmd := exec.Command("sh", "-c", "exit 3")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := waitExitedPolled(cmd.Process.Pid); err != nil {
		t.Skipf("no pidfd in the poller here (waitid is used instead): %v", err)
	}
	state, _, err := readStatePgrp("/proc/"+strconv.Itoa(cmd.Process.Pid)+"/stat", make([]byte, 512))
	if err != nil || state != 'Z' {
		t.Errorf("after the wait: state %c, %v; want an unreaped zombie", state, err)
	}
	if err := cmd.Wait(); cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 3 {
		t.Errorf("Wait after the polled wait: %v, want exit status 3", err)
	}
}

// TestForkingThreadOutlivesChild: the thread that forked a child is given
// back to the runtime once the child is reaped, not retired with the
// goroutine that watched it; a crash loop would otherwise make a thread
// per restart on the start's path.
func TestForkingThreadOutlivesChild(t *testing.T) {
	var tids []string
	for range 8 {
		out := newLines()
		spec := helperSpec(t, "pong")
		spec.Stdout = out
		c := start(t, spec)
		out.next(t)
		tid := forkingThread(t, c.PID())
		c.Signal(syscall.SIGTERM)
		wait(t, c)
		tids = append(tids, tid)
	}
	for _, tid := range tids {
		if _, err := os.Stat("/proc/self/task/" + tid); err != nil {
			t.Errorf("thread %s, which forked a child, is gone after it (%v); forkers %v", tid, err, tids)
		}
	}
}

// forkingThread is the thread of this process whose child pid is.
func forkingThread(t *testing.T, pid int) string {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/children")
		if err != nil {
			continue
		}
		if slices.Contains(strings.Fields(string(b)), strconv.Itoa(pid)) {
			return task.Name()
		}
	}
	t.Fatalf("no thread has child %d", pid)
	return ""
}
