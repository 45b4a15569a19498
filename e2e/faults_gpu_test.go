package e2e

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// breakSimGPU makes the simulated GPU 0 fail to read, as a lost GPU
// fails: its usage dir is replaced by a plain file. The returned func
// repairs it.
func breakSimGPU(t *testing.T, e *env) (repair func()) {
	t.Helper()
	dev := filepath.Join(e.stateDir, "sim", "0")
	if err := os.RemoveAll(dev); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dev, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if err := os.Remove(dev); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(dev, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// events returns the journal's events named name (the journal may be
// mid-write: an incomplete last line is skipped).
func events(e *env, name string) []string {
	return journalEvents(filepath.Join(e.stateDir, "events.jsonl"), name)
}

// journalEvents are the complete lines of event name in the journal at path.
func journalEvents(path, name string) []string {
	b, _ := os.ReadFile(path)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, `"event":"`+name+`"`) && strings.HasSuffix(l, "}") {
			out = append(out, l)
		}
	}
	return out
}

const faultPolicy = `
[watch]
backend = "sim"
interval = "50ms"
`

// TestGPUFaultKeep: with the default on_gpu_lost = "keep", a GPU that
// cannot be read leaves the child running; the fault is journaled once
// (not twenty times a second), and when the GPU reads again gpuguard
// says so and goes on.
func TestGPUFaultKeep(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pol := e.policy(faultPolicy)
	addr := freeLoopbackAddr(t)
	p := e.start(append([]string{"run", "--policy", pol, "--name", "gk", "--metrics-addr", addr}, sh("echo up; exec sleep 300")...))
	p.expect("up")
	waitFor(t, "metrics", 30*time.Second, func() bool { _, ok := probeErrors(addr); return ok })
	repair := breakSimGPU(t, e)
	// Twenty failed samples counted, one journal line.
	waitFor(t, "20 probe errors counted", 30*time.Second, func() bool { n, _ := probeErrors(addr); return n >= 20 })
	// The counter is bumped at each sample; the journal line is written by
	// the journal's own goroutine, with nothing ordering it before the
	// scrape: wait for it too.
	var pe []string
	waitFor(t, "the probe_error event", 30*time.Second, func() bool { pe = events(e, "probe_error"); return len(pe) > 0 })
	if len(pe) != 1 || !strings.Contains(pe[0], "not a directory") {
		t.Fatalf("probe_error events after a second of failures: %q, want one", pe)
	}
	code, out, _ := e.run([]string{"status", "gk", "--json", "--runtime-dir", e.runDir})
	if code != 0 || !strings.Contains(out, `"state": "running"`) && !strings.Contains(out, `"state":"running"`) {
		t.Fatalf("status while the GPU fails: exit %d\n%s", code, out)
	}
	repair()
	waitFor(t, "recovery", 30*time.Second, func() bool { return strings.Contains(p.stderr.String(), "GPU probe recovered") })
	p.signal(syscall.SIGTERM)
	if code := p.wait(); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("exit %d, want the child's 143", code)
	}
}

// TestGPUFaultStop: with on_gpu_lost = "stop", a GPU unreadable for
// lost_after stops the child with stop_signal and gpuguard exits 1, even
// though the child itself exits 0.
func TestGPUFaultStop(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pol := e.policy(strings.Replace(faultPolicy, "[watch]", "[watch]\non_gpu_lost = \"stop\"\nlost_after = \"1s\"", 1))
	p := e.start(append([]string{"run", "--policy", pol, "--name", "gs"},
		sh(`trap 'echo "got TERM"; exit 0' TERM; echo up; while :; do sleep 0.05; done`)...))
	p.expect("up")
	t0 := time.Now()
	breakSimGPU(t, e)
	p.expect("got TERM")
	if d := time.Since(t0); d < time.Second {
		t.Errorf("stopped %s after the fault, before lost_after (1s)", d)
	}
	if code := p.wait(); code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, p.stderr.String())
	}
	if !strings.Contains(p.stderr.String(), `on_gpu_lost = "stop"`) {
		t.Errorf("stderr does not say why:\n%s", p.stderr.String())
	}
	if g := events(e, "giveup"); len(g) != 1 || !strings.Contains(g[0], `"reason":"gpu_lost"`) {
		t.Errorf("giveup events %q", g)
	}
}

// probeErrors scrapes gpuguard_probe_errors_total from the metrics at addr.
func probeErrors(addr string) (float64, bool) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "gpuguard_probe_errors_total{") {
			f := strings.Fields(l)
			n, err := strconv.ParseFloat(f[len(f)-1], 64)
			return n, err == nil
		}
	}
	return 0, false
}
