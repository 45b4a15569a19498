package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/control"
	"github.com/gpuguard/gpuguard/internal/admission"
	probeopen "github.com/gpuguard/gpuguard/internal/backends/open"
)

// statusTestBackend answers like a supervisor with a three-profile ladder.
type statusTestBackend struct {
	mu    sync.Mutex
	name  string
	level int
}

var statusTestLadder = []string{"fp16", "int8", "int4"}

func (b *statusTestBackend) Status() api.Status {
	b.mu.Lock()
	defer b.mu.Unlock()
	return api.Status{
		Name: b.name, PID: 100, ChildPID: 101, State: api.StateRunning,
		Profile: statusTestLadder[b.level], Level: b.level, Levels: len(statusTestLadder),
		Watermark: 0.5, UptimeSeconds: 65,
		GPUs: []api.GPU{{Index: 0, UUID: "GPU-" + b.name, Name: "Sim GPU", UsedBytes: 8 << 30, TotalBytes: 16 << 30}},
	}
}

func (b *statusTestBackend) Step(_ context.Context, dir string) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	next := b.level + 1
	if dir == control.StepUp {
		next = b.level - 1
	}
	if next < 0 || next >= len(statusTestLadder) {
		return "", fmt.Errorf("already at the %s end of the ladder (%s)", map[string]string{"up": "top", "down": "bottom"}[dir], statusTestLadder[b.level])
	}
	b.level = next
	return statusTestLadder[next], nil
}

func (b *statusTestBackend) MarkOOM(string) {}
func (b *statusTestBackend) Reserve(context.Context, admission.Request) (admission.Decision, error) {
	return admission.Decision{Decision: admission.DecisionCPU}, nil
}
func (b *statusTestBackend) Release(context.Context, string) error { return nil }

// statusTestServe runs a real control server for name in dir until the test
// ends.
func statusTestServe(t *testing.T, dir, name string) *statusTestBackend {
	t.Helper()
	b := &statusTestBackend{name: name}
	serveBackend(t, dir, name, b)
	return b
}

// serveBackend runs a real control server answering from b for name in dir
// until the test ends.
func serveBackend(t *testing.T, dir, name string, b control.Backend) {
	t.Helper()
	s, err := control.Listen(dir, name)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, b) }()
	t.Cleanup(func() {
		cancel()
		<-done
		s.Close()
	})
}

// statusTestStale leaves a socket nobody listens on, as a killed instance does.
func statusTestStale(t *testing.T, dir, name string) {
	t.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, name+".sock"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
}

func statusTestRun(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Execute(&IO{In: strings.NewReader(""), Out: &out, ErrOut: &errOut, Getenv: func(k string) string { return env[k] }}, args)
	return code, out.String(), errOut.String()
}

func TestStatusJSON(t *testing.T) {
	dir := t.TempDir()
	statusTestServe(t, dir, "llama")
	statusTestServe(t, dir, "qwen")
	statusTestStale(t, dir, "dead")

	code, out, stderr := statusTestRun(t, nil, "status", "--json", "--runtime-dir", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r struct {
		Instances []api.Status `json:"instances"`
		GPUs      []api.GPU    `json:"gpus"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	// The killed instance's socket (its lock is free) is swept, not listed.
	if len(r.Instances) != 2 {
		t.Fatalf("instances = %+v", r.Instances)
	}
	if !strings.Contains(stderr, `removed the stale socket`) || !strings.Contains(stderr, `"dead" is not running`) {
		t.Errorf("no word of the sweep: %q", stderr)
	}
	if _, err := os.Lstat(filepath.Join(dir, "dead.sock")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the stale socket is still there: %v", err)
	}
	llama, qwen := r.Instances[0], r.Instances[1]
	if llama.Name != "llama" || llama.State != "running" || llama.Profile != "fp16" || llama.Levels != 3 || qwen.Name != "qwen" {
		t.Errorf("live instances = %+v, %+v", llama, qwen)
	}
	if len(r.GPUs) != 2 || r.GPUs[0].UUID != "GPU-llama" || r.GPUs[1].UUID != "GPU-qwen" {
		t.Errorf("gpus = %+v", r.GPUs)
	}

	// NAME filters.
	code, out, _ = statusTestRun(t, nil, "status", "qwen", "--json", "--runtime-dir", dir)
	if code != 0 || !strings.Contains(out, `"name": "qwen"`) || strings.Contains(out, "llama") {
		t.Errorf("status qwen: exit %d\n%s", code, out)
	}
}

func TestStatusNamedFailures(t *testing.T) {
	dir := t.TempDir()
	statusTestServe(t, dir, "llama")
	statusTestStale(t, dir, "dead")

	code, _, stderr := statusTestRun(t, nil, "status", "nope", "--runtime-dir", dir)
	if code != ExitFailure || !strings.Contains(stderr, `no such instance "nope"`) {
		t.Errorf("missing instance: exit %d, stderr %q", code, stderr)
	}
	code, out, stderr := statusTestRun(t, nil, "status", "dead", "--json", "--runtime-dir", dir)
	if code != ExitFailure || !strings.Contains(out, `"state": "unreachable"`) || !strings.Contains(stderr, `instance "dead" is unreachable`) {
		t.Errorf("unreachable instance: exit %d, out %s, stderr %q", code, out, stderr)
	}
}

func TestStatusTable(t *testing.T) {
	dir := t.TempDir()
	statusTestServe(t, dir, "llama")
	code, out, stderr := statusTestRun(t, map[string]string{"GPUGUARD_RUNTIME_DIR": dir}, "status")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"NAME ", "llama  100 ", "fp16 (0/3)", "8.0/16.0 GiB", "running", "GPU  NAME", "Sim GPU"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b[") {
		t.Errorf("colours on a non-terminal:\n%q", out)
	}
}

func TestStatusWithoutInstancesReadsTheBackend(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "none") // does not exist: no instances
	sim := t.TempDir()
	code, out, stderr := statusTestRun(t, nil, "status", "--json", "--runtime-dir", empty,
		"--backend", "sim", "--sim-dir", sim, "--sim-devices", "2", "--sim-memory", "8GiB")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r statusTestReport
	json.Unmarshal([]byte(out), &r)
	if len(r.Instances) != 0 || len(r.GPUs) != 2 || r.GPUs[1].TotalBytes != 8<<30 {
		t.Errorf("report = %s", out)
	}

	// The default backend (NVML) is missing on most test machines: the
	// GPUs are then empty with a warning, and status still succeeds.
	code, out, stderr = statusTestRun(t, nil, "status", "--json", "--runtime-dir", empty)
	r = statusTestReport{}
	if err := json.Unmarshal([]byte(out), &r); code != 0 || err != nil || r.Instances == nil || r.GPUs == nil {
		t.Fatalf("exit %d, %v: %s", code, err, out)
	}
	if len(r.GPUs) == 0 && !strings.Contains(stderr, "warning: use --backend sim for the simulated GPU: no GPU found") {
		t.Errorf("no GPUs and no warning: %q", stderr)
	}
	// One line, the hint first: not the list of every path NVML was looked for in.
	if len(r.GPUs) == 0 && (strings.Count(stderr, "\n") != 1 || len(stderr) > 200) {
		t.Errorf("the no-GPU warning is not one short line: %q", stderr)
	}
}

type statusTestReport struct {
	Instances []api.Status `json:"instances"`
	GPUs      []api.GPU    `json:"gpus"`
}

func TestStatusUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"status", "a", "b"},
		{"status", "../x"},
		{"status", "--watch=0s"},
		{"status", "--watch", "0s"},
		{"status", "--watch", "-5s"},
		{"status", "--watch=soon"},
		{"status", "--backend", "cuda"},
		{"status", "--sim-memory", "lots"},
		{"status", "--devices", "0,,1"},
		{"status", "--no-such-flag"},
	} {
		if code, _, stderr := statusTestRun(t, nil, args...); code != ExitUsage {
			t.Errorf("%q: exit %d (%s), want 64", args, code, stderr)
		}
	}
}

func TestStatusFlags(t *testing.T) {
	var got *StatusOptions
	c := NewCmdStatus(&IO{Getenv: func(k string) string { return map[string]string{"CUDA_VISIBLE_DEVICES": "1,GPU-x"}[k] }},
		func(o *StatusOptions) error { got = o; return nil })
	c.SetArgs([]string{"llama", "--watch", "--json"})
	if err := c.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.Name != "llama" || got.Watch != 2*time.Second || !got.JSON || got.Probe.Backend != "auto" ||
		strings.Join(got.Probe.Devices, ",") != "1,GPU-x" || got.Probe.SimMemory != 16<<30 || got.Timeout != time.Second {
		t.Errorf("options = %+v", got)
	}
}

// statusFrames is a writer that hands each write to the test.
type statusFrames chan string

func (f statusFrames) Write(p []byte) (int, error) { f <- string(p); return len(p), nil }

func TestStatusWatch(t *testing.T) {
	dir := t.TempDir()
	b := statusTestServe(t, dir, "llama")
	frames := make(statusFrames)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	o := &StatusOptions{IO: &IO{Out: frames, ErrOut: os.Stderr, Getenv: func(string) string { return "" }},
		JSON: true, Watch: time.Millisecond, RuntimeDir: dir, Timeout: time.Second, Probe: probeopen.Options{Backend: "auto"}}
	go func() { done <- runStatus(ctx, o) }()

	first := <-frames
	b.Step(ctx, control.StepDown)
	// Each refresh is one compact JSON line; a later one sees the step.
	for {
		f := <-frames
		if strings.Count(f, "\n") != 1 || !json.Valid([]byte(f)) {
			t.Fatalf("frame %q is not one JSON line", f)
		}
		if strings.Contains(f, `"profile":"int8"`) {
			break
		}
	}
	if !strings.Contains(first, `"profile":"fp16"`) {
		t.Errorf("first frame %s", first)
	}
	cancel()
	for {
		select {
		case <-frames:
			continue
		case err := <-done:
			if err != nil {
				t.Fatalf("runStatus = %v", err)
			}
			return
		}
	}
}

// TestStatusKeepsAHeldSocket: an unreachable instance whose lock is held
// (alive but not answering) is listed as unreachable and its socket kept.
func TestStatusKeepsAHeldSocket(t *testing.T) {
	dir := t.TempDir()
	statusTestStale(t, dir, "hung")
	lock, err := os.OpenFile(filepath.Join(dir, "hung.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := statusTestRun(t, nil, "status", "--json", "--runtime-dir", dir)
	if code != 0 || !strings.Contains(out, `"state": "unreachable"`) || strings.Contains(stderr, "removed") {
		t.Fatalf("exit %d: %s %s", code, out, stderr)
	}
	if _, err := os.Lstat(filepath.Join(dir, "hung.sock")); err != nil {
		t.Errorf("a live instance's socket was removed: %v", err)
	}
}

// TestStatusWatchTakesASeparateDuration: `--watch 5s` is a period, not an
// instance named 5s; a NAME after it, or before, stays the NAME.
func TestStatusWatchTakesASeparateDuration(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		watch time.Duration
		name  string
	}{
		{[]string{"--watch", "5s"}, 5 * time.Second, ""},
		{[]string{"--watch", "5s", "llama"}, 5 * time.Second, "llama"},
		{[]string{"llama", "--watch", "500ms"}, 500 * time.Millisecond, "llama"},
		{[]string{"--watch", "llama"}, 2 * time.Second, "llama"},
		{[]string{"--watch=3s", "llama"}, 3 * time.Second, "llama"},
		{[]string{"--watch", "1d"}, 24 * time.Hour, ""},
	} {
		var got *StatusOptions
		c := NewCmdStatus(&IO{Getenv: func(string) string { return "" }}, func(o *StatusOptions) error { got = o; return nil })
		c.SetArgs(tc.args)
		if err := c.Execute(); err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if got.Watch != tc.watch || got.Name != tc.name {
			t.Errorf("%q: watch %s name %q, want %s %q", tc.args, got.Watch, got.Name, tc.watch, tc.name)
		}
	}
	if code, _, _ := statusTestRun(t, nil, "status", "--watch", "5s", "a", "b"); code != ExitUsage {
		t.Errorf("two names after --watch 5s: exit %d, want 64", code)
	}
}
