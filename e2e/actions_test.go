package e2e

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sleepyTables are the name and the [watch], [watermark] and [restart]
// tables of the server-action tests' instance, "sleepy", on the sim GPU.
const sleepyTables = `
name = "sleepy"
[watch]
backend  = "sim"
interval = "100ms"
[watermark]
high     = 0.90
critical = 0.99
low      = 0.50
sustain  = "300ms"
grace    = "3s"
recover_after = "0s"
[restart]
backoff      = "100ms"
stop_timeout = "10s"
release_timeout = "1s"
`

// sleepPolicy puts the vLLM fake behind a front door with a live
// profile that sleeps through the server's own API. %s: listen, upstream,
// health, the profile's enter and leave.
const sleepPolicy = sleepyTables + `[serve]
listen   = "%s"
upstream = "http://%s"
health   = "%s"
hold     = "60s"
retry    = false
[[profile]]
name = "awake"
live = true
[[profile]]
name    = "asleep"
live    = true
serving = false
%s
`

// vllmActions are vLLM's sleep and wake, the sleep with timeout.
func vllmActions(timeout string) string {
	return fmt.Sprintf(`enter = [{ path = "/sleep?level=1&mode=wait", timeout = %q }]
leave = [{ path = "/wake_up" }]`, timeout)
}

// ollamaActions unload the model; there is no leave: the next request
// reloads it.
const ollamaActions = `enter = [{ path = "/api/generate", body = '{"model":"m","keep_alive":0}' }]`

// sglangActions are SGLang's: pause, release; resume, continue.
const sglangActions = `enter = [{ path = "/pause_generation", body = '{"mode":"retract"}' },
         { path = "/release_memory_occupation", body = '{}' }]
leave = [{ path = "/resume_memory_occupation", body = '{}' },
         { path = "/continue_generation", body = '{}' }]`

const (
	fakeAwake  = 4 << 30
	fakeAsleep = 256 << 20
)

// sleepRun is one gpuguard around the vLLM fake.
type sleepRun struct {
	e           *env
	p           *proc
	door, child string
	metricsAt   string
	name        string // the instance's name; "" is sleepPolicy's "sleepy"
}

func startSleepRun(t *testing.T, script, actions string, env ...string) *sleepRun {
	t.Helper()
	return startSleepRunEdited(t, script, actions, func(p string) string { return p }, env...)
}

// fakeServer is the absolute path of testdata's fake server script; the
// test is skipped where python3 is not installed.
func fakeServer(t *testing.T, script string) string {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	fake, err := filepath.Abs("testdata/" + script)
	if err != nil {
		t.Fatal(err)
	}
	return fake
}

// startSleepRunEdited is startSleepRun with sleepPolicy passed through
// edit once it is filled in.
func startSleepRunEdited(t *testing.T, script, actions string, edit func(string) string, env ...string) *sleepRun {
	t.Helper()
	fake := fakeServer(t, script)
	e := newEnv(t)
	s := &sleepRun{e: e, door: freeLoopbackAddr(t), child: freeLoopbackAddr(t), metricsAt: freeLoopbackAddr(t)}
	health := "/health"
	if script == "ollama_fake.py" {
		health = "/" // Ollama answers GET /, not /health
	}
	pol := e.policy(edit(fmt.Sprintf(sleepPolicy, s.door, s.child, health, actions)))
	_, port, _ := net.SplitHostPort(s.child)
	s.p = e.start([]string{"run", "--policy", pol, "--metrics-addr", s.metricsAt, "--",
		"/usr/bin/python3", fake, port, "1", strconv.Itoa(fakeAwake), strconv.Itoa(fakeAsleep)}, env...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gpuguard's stderr:\n%s", s.p.stderr.String())
		}
	})
	waitFor(t, "the first ready event", 60*time.Second, func() bool { return len(events(e, "ready")) >= 1 })
	return s
}

// neighbour sets (or, with 0, removes) another tenant's memory on sim GPU 0.
func (s *sleepRun) neighbour(t *testing.T, n uint64) {
	t.Helper()
	p := filepath.Join(s.e.stateDir, "sim", "0", "neighbour")
	if n == 0 {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := os.WriteFile(p, []byte(fmt.Sprint(n)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// status is the instance's status object.
func (s *sleepRun) status(t *testing.T) map[string]any {
	t.Helper()
	code, out, stderr := s.e.run([]string{"status", cmp.Or(s.name, "sleepy"), "--json", "--runtime-dir", s.e.runDir})
	if code != 0 {
		t.Fatalf("status: exit %d %s", code, stderr)
	}
	var st map[string]any
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status output %q: %v", out, err)
	}
	if inst, ok := st["instances"].([]any); ok && len(inst) == 1 {
		st, _ = inst[0].(map[string]any)
	}
	return st
}

// childMemory is what the fake wrote for its PID in the sim dir.
// wakeUnderLoad steps the instance up to "awake" with `gpuguard step`,
// waits until the clients have had 20 more answers (what names them),
// stops the load and checks that no request failed.
func (s *sleepRun) wakeUnderLoad(t *testing.T, load *clientLoad, what string) {
	t.Helper()
	code, out, stderr := s.e.run([]string{"step", "sleepy", "up", "--runtime-dir", s.e.runDir})
	// Once there is room, a request the door holds may wake the instance
	// before the step up does (wake on request): then the step up finds it
	// awake, or still waking (a manual step is refused while the instance
	// steps), and the wake's stepup event says request.
	byRequest := func() bool {
		return slices.ContainsFunc(events(s.e, "stepup"), func(ev string) bool { return strings.Contains(ev, `"reason":"request"`) })
	}
	if code != 0 && strings.Contains(stderr, "instance is stepping") {
		waitFor(t, "the wake by request", 30*time.Second, func() bool { return byRequest() && s.status(t)["state"] == "running" })
	}
	wokenByRequest := code != 0 && (strings.Contains(stderr, "already at the first profile awake") ||
		strings.Contains(stderr, "instance is stepping")) && byRequest()
	if (code != 0 || strings.TrimSpace(out) != "awake") && !wokenByRequest {
		t.Fatalf("step up: exit %d %q %s", code, out, stderr)
	}
	target := load.count() + 20
	waitFor(t, what, 60*time.Second, func() bool { return load.count() >= target })
	r := load.stop()
	if len(r.failures) > 0 {
		t.Errorf("%d of %d requests failed, first: %v", len(r.failures), r.ok+len(r.failures), r.failures[0])
	}
}

func (s *sleepRun) childMemory(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.e.stateDir, "sim", "0", strconv.Itoa(pid)))
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// TestActionsSleepAndWakeUnderLoad: a watermark step into a serving =
// false profile sleeps the vLLM fake through POST /sleep (no restart),
// its memory leaves the sim GPU, the instance is asleep; `step up` wakes
// it through POST /wake_up. No request of the client load fails across
// both: the door drained before the sleep and held requests until the wake.
func TestActionsSleepAndWakeUnderLoad(t *testing.T) {
	t.Parallel()
	s := startSleepRun(t, "vllm_fake.py", vllmActions("60s"), "VLLM_SERVER_DEV_MODE=1")
	pid := int(s.status(t)["child_pid"].(float64))
	load := startLoad(t, "http://"+s.door, 4)
	waitFor(t, "answered requests", 30*time.Second, func() bool { return load.count() >= 20 })
	s.neighbour(t, 11<<30)
	waitFor(t, "the sleep action", 30*time.Second, func() bool { return len(events(s.e, "action")) == 1 })
	waitFor(t, "state asleep", 30*time.Second, func() bool { return s.status(t)["state"] == "asleep" })
	st := s.status(t)
	if got := int(st["child_pid"].(float64)); got != pid {
		t.Fatalf("child pid %d after the sleep, want the same %d (no restart)", got, pid)
	}
	if m := s.childMemory(t, pid); m != fakeAsleep {
		t.Errorf("the fake holds %d bytes asleep, want %d", m, fakeAsleep)
	}
	if !strings.Contains(events(s.e, "action")[0], `"path":"/sleep?level=1\u0026mode=wait"`) &&
		!strings.Contains(events(s.e, "action")[0], `"path":"/sleep?level=1&mode=wait"`) {
		t.Errorf("action event %s", events(s.e, "action")[0])
	}
	s.neighbour(t, 0)
	s.wakeUnderLoad(t, load, "answers after the wake")
	if m := s.childMemory(t, pid); m != fakeAwake {
		t.Errorf("the fake holds %d bytes awake, want %d", m, fakeAwake)
	}
	if n := len(events(s.e, "start")); n != 1 {
		t.Errorf("%d start events, want 1: a sleep and a wake restart nothing", n)
	}
	if n := pfMetric(t, s.metricsAt, `gpuguard_actions_total{name="sleepy",result="ok"}`); n != 2 {
		t.Errorf("gpuguard_actions_total{result=ok} = %d, want 2", n)
	}
	s.p.signal(sigterm)
	if code := s.p.wait(); code != 0 {
		t.Errorf("gpuguard exit %d; stderr:\n%s", code, s.p.stderr.String())
	}
}

// TestActionsFailedFallsBack: a sleep action that fails (the fake without
// VLLM_SERVER_DEV_MODE answers 404; with a slow answer, the timeout) is
// journaled action_failed and the step falls back to the profile's
// non-live form: for a serving = false profile, stopping the child. (The
// fallback to a restart into a serving profile is
// supervisor.TestActionsFailureFallsBack.)
func TestActionsFailedFallsBack(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, timeout string
		env           []string
		want          string
	}{
		{"404", "60s", nil, `"status":404`},
		{"timeout", "300ms", []string{"VLLM_SERVER_DEV_MODE=1", "FAKE_SLEEP_DELAY=30"}, `no answer within 300ms`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := startSleepRun(t, "vllm_fake.py", vllmActions(tt.timeout), tt.env...)
			s.neighbour(t, 11<<30)
			waitFor(t, "action_failed", 30*time.Second, func() bool { return len(events(s.e, "action_failed")) == 1 })
			ev := events(s.e, "action_failed")[0]
			if !strings.Contains(ev, tt.want) || !strings.Contains(ev, `"profile":"asleep"`) || !strings.Contains(ev, `"path":"/sleep?level=1`) {
				t.Errorf("action_failed %s: want %s, the profile and the path", ev, tt.want)
			}
			// The profile serves nothing: its non-live form stops the child.
			waitFor(t, "the stop", 30*time.Second, func() bool {
				st := s.status(t)
				return st["state"] == "asleep" && st["child_pid"].(float64) == 0
			})
			if n := len(events(s.e, "start")); n != 1 {
				t.Errorf("%d start events, want 1: the fallback into a serving = false profile stops the child", n)
			}
			s.p.signal(sigterm)
			s.p.wait()
		})
	}
}

// stopPolicy is the vLLM fake (any server would do: no admin API is
// used) with a serving = false profile without actions.
const stopPolicy = `
name = "sleepy"
[watch]
backend  = "sim"
interval = "100ms"
[watermark]
recover_after = "0s"
[restart]
backoff      = "100ms"
stop_timeout = "10s"
release_timeout = "1s"
[serve]
listen   = "%s"
upstream = "http://%s"
hold     = "60s"
[[profile]]
name = "on"
[[profile]]
name    = "off"
serving = false
`

// TestStopAndStartOnRequest: `step down` into a serving = false profile
// without actions stops the child and does not restart it (child_pid 0,
// asleep, its memory gone from the sim GPU); a request through the door
// starts it again, and is answered.
func TestStopAndStartOnRequest(t *testing.T) {
	t.Parallel()
	fake := fakeServer(t, "vllm_fake.py")
	e := newEnv(t)
	s := &sleepRun{e: e, door: freeLoopbackAddr(t), child: freeLoopbackAddr(t)}
	pol := e.policy(fmt.Sprintf(stopPolicy, s.door, s.child))
	_, port, _ := net.SplitHostPort(s.child)
	s.p = e.start([]string{"run", "--policy", pol, "--", "/usr/bin/python3", fake, port, "1",
		strconv.Itoa(fakeAwake), strconv.Itoa(fakeAsleep)})
	waitFor(t, "the first ready event", 60*time.Second, func() bool { return len(events(e, "ready")) >= 1 })
	pid := int(s.status(t)["child_pid"].(float64))
	code, out, stderr := e.run([]string{"step", "sleepy", "down", "--runtime-dir", e.runDir})
	if code != 0 || strings.TrimSpace(out) != "off" {
		t.Fatalf("step down: exit %d %q %s", code, out, stderr)
	}
	st := s.status(t)
	if st["state"] != "asleep" || st["child_pid"].(float64) != 0 {
		t.Fatalf("after the step: state %v child_pid %v, want asleep 0", st["state"], st["child_pid"])
	}
	holds := func() bool {
		for _, g := range s.status(t)["gpus"].([]any) {
			procs, _ := g.(map[string]any)["processes"].([]any)
			for _, p := range procs {
				if int(p.(map[string]any)["pid"].(float64)) == pid {
					return true
				}
			}
		}
		return false
	}
	waitFor(t, "the stopped child's memory to leave the sim GPU", 10*time.Second, func() bool { return !holds() })
	if n := len(events(e, "start")); n != 1 {
		t.Fatalf("%d start events while asleep, want 1", n)
	}
	c := &http.Client{Timeout: 60 * time.Second}
	resp, err := c.Get("http://" + s.door + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-GPUGuard-Profile") != "on" {
		t.Fatalf("request while asleep: %d, profile %q; want 200 from on", resp.StatusCode, resp.Header.Get("X-GPUGuard-Profile"))
	}
	ups := events(e, "stepup")
	if len(ups) != 1 || !strings.Contains(ups[0], `"reason":"request"`) {
		t.Errorf("stepup events %v, want one with reason request", ups)
	}
	s.p.signal(sigterm)
	if code := s.p.wait(); code != 0 {
		t.Errorf("gpuguard exit %d; stderr:\n%s", code, s.p.stderr.String())
	}
}

// TestSGLangSleepUnderLoad: SGLang's fake dies if released while a request
// runs, or resumed for a tag it never released, or health-checked while
// released. A step into its released profile and back under client load
// fails no request and never kills it: the door drained before the
// release, the poller kept off /health while released, and the resume ran
// only after a release.
func TestSGLangSleepUnderLoad(t *testing.T) {
	t.Parallel()
	s := startSleepRun(t, "sglang_fake.py", sglangActions)
	pid := int(s.status(t)["child_pid"].(float64))
	load := startLoad(t, "http://"+s.door, 4)
	waitFor(t, "answered requests", 30*time.Second, func() bool { return load.count() >= 20 })
	s.neighbour(t, 11<<30)
	waitFor(t, "state asleep", 30*time.Second, func() bool { return s.status(t)["state"] == "asleep" })
	if m := s.childMemory(t, pid); m != fakeAsleep {
		t.Errorf("the fake holds %d bytes released, want %d", m, fakeAsleep)
	}
	time.Sleep(6 * time.Second) // longer than the ready poll's 5 s: a /health now would kill it
	s.neighbour(t, 0)
	s.wakeUnderLoad(t, load, "answers after the resume")
	if n := len(events(s.e, "exit")); n != 0 || strings.Contains(s.p.stderr.String(), "scheduler died") {
		t.Fatalf("the SGLang fake died (%d exit events); stderr:\n%s", n, s.p.stderr.String())
	}
	if n := len(events(s.e, "action")); n != 4 {
		t.Errorf("%d action events, want 4 (pause, release, resume, continue)", n)
	}
	s.p.signal(sigterm)
	s.p.wait()
}

// TestOllamaUnloadUnderLoad: Ollama answers the unload at once and frees
// its memory 500 ms later. The step is taken on the 200, the memory is
// seen to go afterwards, and the step back (no leave: Ollama reloads by
// itself) opens the door again; no request fails.
func TestOllamaUnloadUnderLoad(t *testing.T) {
	t.Parallel()
	s := startSleepRun(t, "ollama_fake.py", ollamaActions)
	pid := int(s.status(t)["child_pid"].(float64))
	load := startLoad(t, "http://"+s.door, 4)
	waitFor(t, "answered requests", 30*time.Second, func() bool { return load.count() >= 20 })
	s.neighbour(t, 11<<30)
	waitFor(t, "state asleep", 30*time.Second, func() bool { return s.status(t)["state"] == "asleep" })
	waitFor(t, "the unloaded memory to go", 10*time.Second, func() bool { return s.childMemory(t, pid) == fakeAsleep })
	s.neighbour(t, 0)
	s.wakeUnderLoad(t, load, "answers after the reload")
	if m := s.childMemory(t, pid); m != fakeAwake {
		t.Errorf("the fake holds %d bytes after the reload, want %d", m, fakeAwake)
	}
	if n := len(events(s.e, "start")); n != 1 {
		t.Errorf("%d start events, want 1", n)
	}
	s.p.signal(sigterm)
	s.p.wait()
}
