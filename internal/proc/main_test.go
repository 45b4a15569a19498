package proc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// helperEnv selects a helper mode when the test binary is re-executed as a
// child process.
const helperEnv = "GPUGUARD_PROC_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode, os.Args[1:]))
	}
	goleak.VerifyTestMain(m)
}

// helperSpec is a Spec that runs this test binary in helper mode.
func helperSpec(t *testing.T, mode string, args ...string) Spec {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Spec{
		Argv: append([]string{exe}, args...),
		// The race detector sleeps 1s before exit by default.
		Env: append(os.Environ(), helperEnv+"="+mode, "GORACE=atexit_sleep_ms=0"),
	}
}

func runHelper(mode string, args []string) int {
	switch mode {
	case "args": // print the arguments as JSON
		json.NewEncoder(os.Stdout).Encode(args)
	case "stderr": // write testData(n) to stderr in odd-sized chunks
		n, _ := strconv.Atoi(args[0])
		data := testData(n)
		for len(data) > 0 {
			k := min(len(data), 7919)
			os.Stderr.Write(data[:k])
			data = data[k:]
		}
	case "fds": // print where stdout and stderr point
		out, _ := os.Readlink("/proc/self/fd/1")
		errp, _ := os.Readlink("/proc/self/fd/2")
		fmt.Fprintf(os.Stderr, "stderr=%s\n", errp)
		fmt.Printf("stdout=%s\n", out)
	case "pong": // answer SIGUSR1 with "pong", exit 0 on SIGTERM
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGUSR1, syscall.SIGTERM)
		fmt.Println("ready")
		for s := range ch {
			if s == syscall.SIGTERM {
				return 0
			}
			fmt.Println("pong")
		}
	case "hold": // optionally leave the process group, then wait to be killed
		if len(args) > 0 && args[0] == "setsid" {
			if _, err := syscall.Setsid(); err != nil {
				return 2
			}
		}
		fmt.Println("ready")
		os.Stdout.Close()
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM)
		<-ch
	case "escape": // leave a grandchild outside the group holding stderr, exit 3
		return escape()
	case "orphan": // start a child through Start, print its pid, die
		exe, _ := os.Executable()
		null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			return 2
		}
		c, err := Start(Spec{Argv: []string{exe}, Env: append(os.Environ(), helperEnv+"=hold"), Stdout: null})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		fmt.Println(c.PID())
		os.Exit(0)
	default:
		fmt.Fprintf(os.Stderr, "unknown helper mode %q\n", mode)
		return 2
	}
	return 0
}

func escape() int {
	exe, _ := os.Executable()
	cmd := exec.Command(exe, "setsid")
	cmd.Env = append(os.Environ(), helperEnv+"=hold")
	cmd.Stderr = os.Stderr // the grandchild keeps fd 2 open
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 2
	}
	if err := cmd.Start(); err != nil {
		return 2
	}
	// Exit only once it has left the group, or the group kill gets it.
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		return 2
	}
	fmt.Println(cmd.Process.Pid)
	return 3
}

// testData is n deterministic, non-repeating-looking bytes.
func testData(n int) []byte {
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// lines is an io.Writer that delivers each complete line on a channel.
type lines struct {
	ch  chan string
	buf []byte
}

func newLines() *lines { return &lines{ch: make(chan string, 100)} }

func (l *lines) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		l.ch <- string(l.buf[:i])
		l.buf = l.buf[i+1:]
	}
}

// next returns the next line, failing the test if none comes in time.
func (l *lines) next(t *testing.T) string {
	t.Helper()
	select {
	case s := <-l.ch:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for a line from the child")
		return ""
	}
}

func (l *lines) nextPID(t *testing.T) int {
	t.Helper()
	s := l.next(t)
	pid, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("want a pid, got %q", s)
	}
	return pid
}

func start(t *testing.T, spec Spec) *Child {
	t.Helper()
	c, err := Start(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Kill()
		<-c.Done()
	})
	return c
}

// wait waits for Done, failing the test if it never comes.
func wait(t *testing.T, c *Child) Exit {
	t.Helper()
	select {
	case <-c.Done():
		return c.Exit()
	case <-time.After(10 * time.Second):
		t.Fatal("child not done after 10s")
		return Exit{}
	}
}

// alive reports whether pid exists and is not a zombie (a killed orphan
// stays a zombie until its new parent reaps it).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

// waitGone polls until pid is gone, failing the test after a deadline.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still alive", pid)
		}
		<-tick.C
	}
}

// killOnCleanup kills a process that escaped the child's group.
func killOnCleanup(t *testing.T, pid int) {
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
}
