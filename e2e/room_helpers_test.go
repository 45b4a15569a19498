package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
	gjournal "github.com/gpuguard/gpuguard/internal/journal"
)

// quickTables are the [watch], [watermark] and [restart] tables of an
// instance on the sandbox's sim GPU that samples every 50 ms and steps
// 100 ms after a crossing (low at 10 %): the room and shared-action tests'.
const quickTables = `
[watch]
interval = "50ms"
settle = "100ms"
[watermark]
high = 0.90
critical = 0.99
low = 0.10
sustain = "100ms"
grace = "1s"
recover_after = "0s"
[restart]
backoff = "100ms"
stop_timeout = "10s"
release_timeout = "1s"
`

// roomPolicyText is a vLLM-sleep instance behind its own door that shares
// the sandbox's sim GPU: awake needs %[3]s, asleep %[4]s; keep_awake %[5]s,
// hold %[6]s; %[7]s is more [serve] keys. %[1]s, %[2]s: listen, upstream.
const roomPolicyText = quickTables + `[serve]
listen = "%[1]s"
upstream = "http://%[2]s"
health = "/health"
retry = false
keep_awake = "%[5]s"
hold = "%[6]s"
%[7]s
[[profile]]
name = "awake"
live = true
needs = "%[3]s"
[[profile]]
name = "asleep"
serving = false
needs = "%[4]s"
%[8]s
`

// vllmSleep is the sleeping profile's vLLM sleep mode; without it the
// server is stopped to sleep.
const vllmSleep = `live = true
enter = [{ path = "/sleep?level=1&mode=wait" }]
leave = [{ path = "/wake_up" }]`

// vllmSleepLadder is a ladder of two live profiles: awake, and asleep
// through vLLM's sleep mode.
const vllmSleepLadder = `[[profile]]
name = "awake"
live = true
[[profile]]
name = "asleep"
serving = false
` + vllmSleep + "\n"

// roomMetrics is a model's [metrics] section. %s: its address.
const roomMetrics = `
[metrics]
listen = "%s"
`

// model is one instance of a room test: the vLLM fake behind gpuguard,
// its door's address.
type model struct {
	e         *env
	name      string
	p         *proc
	door      string
	metricsAt string // its /metrics
}

// modelOpts size a model: the fake's bytes awake and asleep, the
// profiles' needs, its priority, keep_awake and hold, and more [serve]
// keys.
type modelOpts struct {
	awake, asleep    uint64
	needs, sleepNeed string
	prio             int
	keepAwake, hold  string
	serve            string
	// stopped: the server is stopped to sleep (no sleep API); startAsleep:
	// the instance starts asleep, no server until its first request.
	stopped, startAsleep bool
}

// bigModel is 10 GiB awake, 1 GiB asleep, needs to match: two of them do
// not fit on the 16 GiB sim GPU (14.4 GiB under high) together.
func bigModel() modelOpts {
	return modelOpts{awake: 10 << 30, asleep: 1 << 30, needs: "10GiB", sleepNeed: "1GiB", keepAwake: "1s", hold: "60s"}
}

// startModel starts gpuguard as name around the vLLM fake and waits for
// its ready event.
func (e *env) startModel(name string, o modelOpts) *model {
	e.t.Helper()
	fake := fakeServer(e.t, "vllm_fake.py")
	door, child := freeLoopbackAddr(e.t), freeLoopbackAddr(e.t)
	_, port, _ := net.SplitHostPort(child)
	script := fmt.Sprintf("exec /usr/bin/python3 %s %s 0 %d %d\n", fake, port, o.awake, o.asleep)
	sleep := vllmSleep
	if o.stopped {
		sleep = ""
	}
	m := &model{e: e, name: name, door: door, metricsAt: freeLoopbackAddr(e.t)}
	pol := fmt.Sprintf(roomPolicyText, door, child, o.needs, o.sleepNeed, o.keepAwake, o.hold, o.serve, sleep) +
		fmt.Sprintf(roomMetrics, m.metricsAt)
	if o.startAsleep {
		pp, sc := e.path(name+".toml"), e.path(name+".sh")
		for p, text := range map[string]string{pp: pol, sc: script} {
			if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
				e.t.Fatal(err)
			}
		}
		m.p = e.start([]string{"\x00raw", "run", "--name", name, "--priority", strconv.Itoa(o.prio), "--policy", pp,
			"--backend", "sim", "--sim-dir", e.path("sim"), "--state-dir", filepath.Join(e.stateDir, name),
			"--runtime-dir", e.runDir, "--profile", "asleep", "--", "/bin/sh", sc}, "VLLM_SERVER_DEV_MODE=1")
	} else {
		m.p = e.startTenant(name, o.prio, pol, script, "VLLM_SERVER_DEV_MODE=1")
	}
	e.t.Cleanup(func() {
		if e.t.Failed() {
			e.t.Logf("%s's stderr:\n%s", name, m.p.stderr.String())
		}
	})
	if o.startAsleep {
		waitFor(e.t, name+" asleep", 60*time.Second, func() bool {
			st, err := e.statusOf(name)
			return err == nil && st.State == api.StateAsleep
		})
		return m
	}
	waitFor(e.t, name+"'s ready event", 60*time.Second, func() bool { return len(tenantEvents(e, name, "ready")) >= 1 })
	return m
}

// startAsleepAwake starts the model asleep (stepped down by hand once
// ready), then the model awake, and waits until awake runs.
func (e *env) startAsleepAwake(asleep string, ao modelOpts, awake string, wo modelOpts) (*model, *model) {
	e.t.Helper()
	a := e.startModel(asleep, ao)
	a.sleep()
	w := e.startModel(awake, wo)
	e.waitRunning(awake)
	return a, w
}

// sleep steps the model down to asleep by hand.
func (m *model) sleep() {
	m.e.t.Helper()
	if code, out, stderr := m.e.run([]string{"step", m.name, "down", "--runtime-dir", m.e.runDir}); code != 0 || strings.TrimSpace(out) != "asleep" {
		m.e.t.Fatalf("step %s down: exit %d %q %s", m.name, code, out, stderr)
	}
}

// get sends one request through the model's door (query: the path's
// query, "" for none) and returns its status and how long it took; a
// transport error fails the test.
func (m *model) get(query string) (int, time.Duration) {
	m.e.t.Helper()
	code, took, err := m.try(query)
	if err != nil {
		m.e.t.Fatalf("GET %s: %v", m.name, err)
	}
	return code, took
}

// try is get without failing the test.
func (m *model) try(query string) (int, time.Duration, error) {
	c := &http.Client{Timeout: 3 * time.Minute}
	url := "http://" + m.door + "/v1/completions"
	if query != "" {
		url += "?" + query
	}
	began := time.Now()
	resp, err := c.Get(url)
	if err != nil {
		return 0, time.Since(began), err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, time.Since(began), err
}

// status is the model's status object.
func (m *model) status() api.Status {
	m.e.t.Helper()
	st, err := m.e.statusOf(m.name)
	if err != nil {
		m.e.t.Fatal(err)
	}
	return st
}

// events are the model's journal events named ev.
func (m *model) events(ev string) []api.Event {
	m.e.t.Helper()
	evs, _, err := gjournal.Read(filepath.Join(m.e.stateDir, m.name, "events.jsonl"), time.Time{})
	if err != nil {
		m.e.t.Fatal(err)
	}
	var out []api.Event
	for _, e := range evs {
		if e.Event == ev {
			out = append(out, e)
		}
	}
	return out
}

// roomDowns are the model's step-downs to make room.
func (m *model) roomDowns() []api.Event {
	var out []api.Event
	for _, ev := range m.events(api.EventStepDown) {
		if ev.Reason == api.ReasonRoom {
			out = append(out, ev)
		}
	}
	return out
}

// stop ends the model's gpuguard.
func (m *model) stop() {
	m.p.signal(sigterm)
	m.p.wait()
}

// waitAsleep waits until the model is asleep.
func (m *model) waitAsleep(t *testing.T) {
	t.Helper()
	waitFor(t, m.name+" asleep", 30*time.Second, func() bool { return m.status().State == api.StateAsleep })
}

// jsonOf is v as JSON, for messages.
func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
