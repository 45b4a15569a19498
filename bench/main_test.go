package bench

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/control"
	"github.com/gpuguard/gpuguard/internal/testbin"
)

// The binaries, built once when benchmarks run (not for `go test ./...`);
// $GPUGUARD_BENCH_BIN, when set, is the gpuguard binary to measure instead.
var (
	bin      string // gpuguard
	childBin string // benchchild
	proxyBin string // plainproxy
)

func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "gpuguard-bench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin, childBin, proxyBin = filepath.Join(dir, "gpuguard"), filepath.Join(dir, "benchchild"), filepath.Join(dir, "plainproxy")
	builds := [][]string{{bin, ".."}, {childBin, "./benchchild"}, {proxyBin, "./plainproxy"}}
	if prebuilt := os.Getenv("GPUGUARD_BENCH_BIN"); prebuilt != "" {
		// A binary built elsewhere (another commit, other flags).
		bin, builds = prebuilt, builds[1:]
	}
	for _, b := range builds {
		// A plain build, as shipped: no -race, which would slow every path.
		if err := testbin.Build(b[0], b[1], false); err != nil {
			fmt.Fprintln(os.Stderr, "building", b[1], err)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// sandbox is one benchmark's dirs: a shared runtime dir and one state dir
// per instance, all under a short temp dir (socket paths are limited to
// 108 bytes).
type sandbox struct {
	b      *testing.B
	dir    string
	runDir string
}

func newSandbox(b *testing.B) *sandbox {
	b.Helper()
	dir, err := os.MkdirTemp("", "gb")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return &sandbox{b: b, dir: dir, runDir: filepath.Join(dir, "run")}
}

// policy writes a policy file and returns its path.
func (s *sandbox) policy(name, text string) string {
	s.b.Helper()
	p := filepath.Join(s.dir, name+".toml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		s.b.Fatal(err)
	}
	return p
}

// guard is one running `gpuguard run`.
type guard struct {
	b        *testing.B
	name     string
	stateDir string
	socket   string
	cmd      *exec.Cmd
	lines    chan string // stdout: the child's lines (gpuguard logs to stderr)
	stderr   *testbin.Buffer
	done     chan struct{}
	err      error
}

// start runs `gpuguard run` with the sim backend, the policy file, extra
// flags and the child's argv.
func (s *sandbox) start(name, policy string, flags []string, child ...string) *guard {
	s.b.Helper()
	return s.startBin(bin, name, policy, flags, child...)
}

// startBin is start with another gpuguard binary.
func (s *sandbox) startBin(bin, name, policy string, flags []string, child ...string) *guard {
	s.b.Helper()
	stateDir := filepath.Join(s.dir, name)
	args := []string{"run", "--name", name, "--backend", "sim", "--policy", policy,
		"--state-dir", stateDir, "--runtime-dir", s.runDir}
	args = append(append(args, flags...), "--")
	args = append(args, child...)
	cmd := exec.Command(bin, args...)
	cmd.Dir = s.dir
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		s.b.Fatal(err)
	}
	g := &guard{b: s.b, name: name, stateDir: stateDir, socket: filepath.Join(s.runDir, name+".sock"),
		cmd: cmd, lines: make(chan string, 1<<16), stderr: &testbin.Buffer{}, done: make(chan struct{})}
	cmd.Stderr = g.stderr
	if err := cmd.Start(); err != nil {
		s.b.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			g.lines <- sc.Text()
		}
		close(g.lines)
	}()
	go func() {
		g.err = cmd.Wait()
		close(g.done)
	}()
	s.b.Cleanup(func() { g.stop() })
	return g
}

// stop sends SIGTERM (forwarded to the child) and waits for gpuguard.
func (g *guard) stop() {
	select {
	case <-g.done:
		return
	default:
	}
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.done:
	case <-time.After(30 * time.Second):
		_ = g.cmd.Process.Kill()
		<-g.done
	}
}

// wait waits for gpuguard to end by itself and fails on a non-zero exit.
func (g *guard) wait(d time.Duration) {
	g.b.Helper()
	select {
	case <-g.done:
	case <-time.After(d):
		g.b.Fatalf("%s did not end within %s; stderr:\n%s", g.name, d, g.stderr.Tail(4096))
	}
	if g.err != nil {
		g.b.Fatalf("%s: %v; stderr:\n%s", g.name, g.err, g.stderr.Tail(4096))
	}
}

// line returns the next stdout line, failing after d.
func (g *guard) line(d time.Duration) string {
	g.b.Helper()
	select {
	case l, ok := <-g.lines:
		if !ok {
			g.b.Fatalf("%s: stdout closed; stderr:\n%s", g.name, g.stderr.Tail(4096))
		}
		return l
	case <-time.After(d):
		g.b.Fatalf("%s: no output within %s; stderr:\n%s", g.name, d, g.stderr.Tail(4096))
	}
	return ""
}

// running waits until the instance answers on its socket with a child in
// state running, and returns its status client.
func (g *guard) running(ctx context.Context) *control.Client {
	g.b.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		c, err := control.Dial(ctx, g.socket)
		if err == nil {
			st, err := c.Status(ctx)
			if err == nil && st.State == "running" {
				return c
			}
			c.Close()
		}
		time.Sleep(20 * time.Millisecond)
	}
	g.b.Fatalf("%s not running within 30s; stderr:\n%s", g.name, g.stderr.Tail(4096))
	return nil
}

// stats reports median, p99 and max of ds in unit ("ms" or "us") as
// <prefix>median-<unit> etc. and hides ns/op, which for a whole scenario
// means nothing.
func stats(b *testing.B, prefix, unit string, ds []time.Duration) {
	b.Helper()
	if len(ds) == 0 {
		b.Fatalf("%s: no samples", prefix)
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	div := float64(time.Millisecond)
	if unit == "us" {
		div = float64(time.Microsecond)
	}
	at := func(q float64) float64 { return float64(s[int(q*float64(len(s)-1)+0.5)]) / div }
	b.ReportMetric(at(0.5), prefix+"median-"+unit)
	b.ReportMetric(at(0.99), prefix+"p99-"+unit)
	b.ReportMetric(float64(s[len(s)-1])/div, prefix+"max-"+unit)
	b.ReportMetric(0, "ns/op")
}

// fields splits a child's line "<word> <n>..." and checks the word.
func fields(b *testing.B, line, word string, n int) []string {
	b.Helper()
	f := strings.Fields(line)
	if len(f) != n+1 || f[0] != word {
		b.Fatalf("unexpected child line %q (want %q and %d numbers)", line, word, n)
	}
	return f[1:]
}

// reportLoad reports the 1-minute load average taken when the benchmark
// started (call it first, deferred): the figures of a shared 2-core machine
// mean little without it.
func reportLoad(b *testing.B) func() {
	load := -1.0
	if raw, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(raw)); len(f) > 0 {
			load, _ = strconv.ParseFloat(f[0], 64)
		}
	}
	return func() {
		if load >= 0 {
			b.ReportMetric(load, "load1")
		}
	}
}
