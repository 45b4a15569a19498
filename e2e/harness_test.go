package e2e

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/internal/testbin"
)

// bin is the gpuguard binary, race detector on, shared by every test of
// the package (testbin.RaceBinEnv names one built before; scripts/test.sh
// builds it once for all); buildDir is where the package builds the
// binaries no variable names, removed at the end.
var bin, buildDir string

func TestMain(m *testing.M) {
	flag.Parse()
	parallelByDefault(runtime.GOMAXPROCS(0))
	var err error
	if buildDir, err = os.MkdirTemp("", "gpuguard-e2e-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if bin, err = testbin.Binary(buildDir, "..", true); err != nil {
		fmt.Fprintln(os.Stderr, "building gpuguard:", err)
		os.RemoveAll(buildDir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(buildDir)
	os.Exit(code)
}

// parallelByDefault runs up to 4 tests a CPU at a time (go test's default
// is one a CPU) unless -parallel was given: an end-to-end test spends most
// of its time waiting for children, sleeps and timers of its own, not on a
// CPU (doc.go).
func parallelByDefault(cpus int) {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		flag.Set("test.parallel", strconv.Itoa(4*cpus))
	}
}

// env is one test's sandbox: its own state and runtime dirs.
type env struct {
	t        *testing.T
	dir      string
	stateDir string
	runDir   string
	bin      string // the binary start runs: bin unless set
}

func newEnv(t *testing.T) *env {
	t.Helper()
	// Unix socket paths are limited to 108 bytes: keep the dir short.
	dir, err := os.MkdirTemp("", "gg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	e := &env{t: t, dir: dir, stateDir: filepath.Join(dir, "state"), runDir: filepath.Join(dir, "run")}
	return e
}

// path is a file in the sandbox.
func (e *env) path(name string) string { return filepath.Join(e.dir, name) }

// policy writes a policy file and returns its path.
func (e *env) policy(text string) string {
	e.t.Helper()
	p := e.path("policy.toml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		e.t.Fatal(err)
	}
	return p
}

func (e *env) read(name string) string {
	e.t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		e.t.Fatal(err)
	}
	return string(b)
}

// proc is a running gpuguard.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	lines  chan string // the child's (and gpuguard's) stdout, line by line
	stderr *testbin.Buffer
	done   chan struct{}
	code   int
}

// start runs gpuguard with args (sandbox dirs added for run) and extra env.
func (e *env) start(args []string, extraEnv ...string) *proc {
	e.t.Helper()
	if len(args) > 0 && args[0] == "\x00raw" {
		args = args[1:]
	} else if len(args) > 0 && args[0] == "run" {
		args = append([]string{"run", "--state-dir", e.stateDir, "--runtime-dir", e.runDir}, args[1:]...)
	}
	binary := bin
	if e.bin != "" {
		binary = e.bin
	}
	cmd := exec.Command(binary, args...)
	cmd.Dir = e.dir
	cmd.Env = append(os.Environ(), "OUT="+e.path("out"), "GORACE=atexit_sleep_ms=0")
	cmd.Env = append(cmd.Env, extraEnv...)
	// An os.Pipe, not StdoutPipe: Wait closes StdoutPipe's reader, which
	// could drop a short command's last output before it was read.
	stdout, w, err := os.Pipe()
	if err != nil {
		e.t.Fatal(err)
	}
	cmd.Stdout = w
	p := &proc{t: e.t, cmd: cmd, lines: make(chan string, 1000), stderr: &testbin.Buffer{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	err = cmd.Start()
	w.Close() // the child holds its own copy; EOF comes when every writer is gone
	if err != nil {
		e.t.Fatal(err)
	}
	go func() {
		defer stdout.Close()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	go func() {
		err := cmd.Wait()
		p.code = exitCode(err)
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
	return p
}

// run runs gpuguard to completion and returns its exit code, stdout and stderr.
func (e *env) run(args []string, extraEnv ...string) (int, string, string) {
	e.t.Helper()
	p := e.start(args, extraEnv...)
	var out strings.Builder
	for l := range p.lines {
		out.WriteString(l + "\n")
	}
	code := p.wait()
	return code, out.String(), p.stderr.String()
}

// expect waits for a stdout line containing s and returns it.
func (p *proc) expect(s string) string {
	p.t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				p.t.Fatalf("stdout closed before %q; stderr:\n%s", s, p.stderr.String())
			}
			if strings.Contains(l, s) {
				return l
			}
		case <-timeout:
			p.t.Fatalf("no line with %q within 60s; stderr:\n%s", s, p.stderr.String())
		}
	}
}

func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
}

// wait waits for gpuguard to end and returns its exit code.
func (p *proc) wait() int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(90 * time.Second):
		p.t.Fatalf("gpuguard did not end within 90s; stderr:\n%s", p.stderr.String())
	}
	for range p.lines {
	}
	return p.code
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return -1
}

// sh is a child that runs a shell script; extra args become $1...
func sh(script string, args ...string) []string {
	return append([]string{"--", "/bin/sh", "-c", script, "sh"}, args...)
}

// wantAll fails the test, going on, for each of wants that text (what,
// in the message) does not contain.
func wantAll(t *testing.T, what, text string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(text, want) {
			t.Errorf("%s lacks %q:\n%s", what, want, text)
		}
	}
}

// withTimeout returns a context that ends with the test's deadline budget.
func withTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// runRaw is run without the sandbox's --state-dir and --runtime-dir.
func (e *env) runRaw(args []string, extraEnv ...string) (int, string, string) {
	e.t.Helper()
	args = append([]string{"\x00raw"}, args...)
	return e.run(args, extraEnv...)
}
