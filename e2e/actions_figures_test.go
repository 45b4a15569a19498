package e2e

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// restartPolicy is the vLLM fake with a smaller profile reached by a
// restart (no actions): the figures' baseline. %s: listen, upstream.
const restartPolicy = sleepyTables + `[serve]
listen   = "%s"
upstream = "http://%s"
hold     = "60s"
retry    = false
[[profile]]
name = "awake"
[[profile]]
name = "small"
`

// TestFiguresServerActions measures, on the fakes (a 2 s load, as a
// stand-in for vLLM's ~48 s), the figures of docs/performance.md's
// "Server actions" section. It runs only with GPUGUARD_FIGURES=1:
//
//	GPUGUARD_FIGURES=1 go test ./e2e -run TestFiguresServerActions -v
//
// Serial: its figures are times, which other tests' load would stretch.
func TestFiguresServerActions(t *testing.T) {
	if os.Getenv("GPUGUARD_FIGURES") != "1" {
		t.Skip("figures: set GPUGUARD_FIGURES=1")
	}
	const load = "2"
	// 1. Crossing high to memory freed: a sleep step.
	s := startFigureRun(t, fmt.Sprintf(sleepPolicy, "%s", "%s", "/health", vllmActions("60s")), load, "VLLM_SERVER_DEV_MODE=1")
	pid := int(s.status(t)["child_pid"].(float64))
	start := time.Now()
	s.neighbour(t, 11<<30)
	waitFor(t, "the sleep to free the memory", 60*time.Second, func() bool { return s.childMemory(t, pid) == fakeAsleep })
	sleepFreed := time.Since(start)
	// 2. A request to the sleeping instance: a wake.
	s.neighbour(t, 0)
	wake := timedRequest(t, s.door)
	s.stop(t)

	// 1'. The same crossing, a restart step: the old child's memory is
	// freed at its exit; serving again takes the load too.
	r := startFigureRun(t, restartPolicy, load)
	pid = int(r.status(t)["child_pid"].(float64))
	start = time.Now()
	r.neighbour(t, 11<<30)
	waitFor(t, "the old child's exit", 60*time.Second, func() bool { return syscall.Kill(pid, 0) != nil })
	restartFreed := time.Since(start)
	waitFor(t, "the new child ready", 60*time.Second, func() bool { return len(events(r.e, "ready")) >= 2 })
	restartServing := time.Since(start)
	r.stop(t)

	// 2'. A request to a stopped instance: a cold start.
	c := startFigureRun(t, strings.Replace(stopPolicy, "[serve]", "[serve]\nhealth = \"/health\"", 1), load)
	if code, out, stderr := c.e.run([]string{"step", "sleepy", "down", "--runtime-dir", c.e.runDir}); code != 0 {
		t.Fatalf("step down: %d %s %s", code, out, stderr)
	}
	cold := timedRequest(t, c.door)
	c.stop(t)

	// 3. 100 sleep and wake cycles under load, by `step` (wake = false:
	// else the held requests wake it before each step up).
	noWake := strings.Replace(sleepPolicy, "[serve]", "[serve]\nwake = false", 1)
	m := startFigureRun(t, fmt.Sprintf(noWake, "%s", "%s", "/health", vllmActions("60s")), load, "VLLM_SERVER_DEV_MODE=1")
	l := startLoad(t, "http://"+m.door, 4)
	cycles := time.Now()
	for i := range 100 {
		for _, dir := range []string{"down", "up"} {
			if code, out, stderr := m.e.run([]string{"step", "sleepy", dir, "--runtime-dir", m.e.runDir}); code != 0 {
				t.Fatalf("cycle %d step %s: %d %s %s", i, dir, code, out, stderr)
			}
		}
	}
	took := time.Since(cycles)
	res := l.stop()
	m.stop(t)

	t.Logf("load time of the fakes: %s s", load)
	t.Logf("crossing high to memory freed: sleep step %s, restart step %s (serving again after %s)",
		sleepFreed.Round(time.Millisecond), restartFreed.Round(time.Millisecond), restartServing.Round(time.Millisecond))
	t.Logf("request to a sleeping instance to its answer: wake %s, cold start %s", wake.Round(time.Millisecond), cold.Round(time.Millisecond))
	t.Logf("100 sleep/wake cycles under load (4 clients) in %s: %d requests answered, %d failed",
		took.Round(time.Millisecond), res.ok, len(res.failures))
	if len(res.failures) > 0 {
		t.Errorf("%d requests failed across the cycles, first: %v", len(res.failures), res.failures[0])
	}
}

// startFigureRun runs gpuguard with pol (listen and upstream left as %s)
// around the vLLM fake loading for load seconds.
func startFigureRun(t *testing.T, pol, load string, env ...string) *sleepRun {
	t.Helper()
	fake, err := filepath.Abs("testdata/vllm_fake.py")
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	s := &sleepRun{e: e, door: freeLoopbackAddr(t), child: freeLoopbackAddr(t)}
	path := e.policy(fmt.Sprintf(pol, s.door, s.child))
	_, port, _ := net.SplitHostPort(s.child)
	s.p = e.start([]string{"run", "--policy", path, "--", "/usr/bin/python3", fake, port, load,
		strconv.Itoa(fakeAwake), strconv.Itoa(fakeAsleep)}, env...)
	waitFor(t, "the first ready event", 60*time.Second, func() bool { return len(events(e, "ready")) >= 1 })
	return s
}

func (s *sleepRun) stop(t *testing.T) {
	t.Helper()
	s.p.signal(sigterm)
	s.p.wait()
}

// timedRequest sends one request through the door and times its answer.
func timedRequest(t *testing.T, door string) time.Duration {
	t.Helper()
	c := &http.Client{Timeout: 120 * time.Second}
	start := time.Now()
	resp, err := c.Get("http://" + door + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	return time.Since(start)
}
