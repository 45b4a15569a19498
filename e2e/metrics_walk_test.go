package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// listedSeries is one gpuguard_* series that the contract (CONTRACT.md,
// its Metrics section and the sections of the front door, server actions,
// deferred tasks, making room and `gpuguard door`) or the operator's docs
// (docs/operations.md, "Metrics") name.
type listedSeries struct {
	name    string
	section string // the contract's section; "docs" for series only the docs list
	// histogram: exposed as name_bucket, name_sum and name_count.
	histogram bool
	// labels are its label names besides name; values, where the contract
	// lists them, the values that must exist.
	labels []string
	values map[string][]string
	// modelDoor: the series is `gpuguard door`'s, on its own /metrics.
	modelDoor bool
	// pending names a series whose feature is not built yet, and why:
	// the walk fails as soon as the series appears, or the feature does
	// (built), so that it is walked from then on rather than forgotten.
	pending string
	built   func(t *testing.T, e *env) bool
}

// contractSeries is the list the walk checks. TestMetricListMatchesDocs
// holds it to docs/operations.md, and to the contract itself where
// $GPUGUARD_CONTRACT names it.
var contractSeries = []listedSeries{
	{name: "gpuguard_gpu_memory_used_bytes", section: "Metrics", labels: []string{"gpu", "uuid"}},
	{name: "gpuguard_gpu_memory_total_bytes", section: "Metrics", labels: []string{"gpu", "uuid"}},
	{name: "gpuguard_watermark_ratio", section: "Metrics"},
	{name: "gpuguard_profile_level", section: "Metrics"},
	{name: "gpuguard_child_up", section: "Metrics"},
	{name: "gpuguard_stepdowns_total", section: "Metrics", labels: []string{"reason"},
		values: map[string][]string{"reason": {"watermark", "critical", "predicted", "manual", "observe", "idle", "room"}}},
	{name: "gpuguard_stepups_total", section: "Metrics", labels: []string{"reason"},
		values: map[string][]string{"reason": {"recovered", "manual", "request"}}},
	{name: "gpuguard_oom_fallback_total", section: "Metrics", labels: []string{"from", "to"}},
	{name: "gpuguard_restarts_total", section: "Metrics", labels: []string{"reason"},
		values: map[string][]string{"reason": {"oom", "crash", "watermark"}}},
	{name: "gpuguard_admission_decisions_total", section: "Metrics", labels: []string{"decision"},
		values: map[string][]string{"decision": {"gpu", "cpu", "defer", "deny"}}},
	{name: "gpuguard_probe_errors_total", section: "Metrics"},
	{name: "gpuguard_probe_duration_seconds", section: "Metrics", histogram: true},
	{name: "gpuguard_poll_interval_seconds", section: "Metrics"},
	// Absent or +Inf when not rising: the walk raises the usage for it.
	{name: "gpuguard_watermark_eta_seconds", section: "Metrics"},
	{name: "gpuguard_yields_total", section: "Metrics"},
	{name: "gpuguard_gpu_faults_total", section: "Metrics", labels: []string{"gpu", "xid"}},
	{name: "gpuguard_reloads_total", section: "Metrics", labels: []string{"result"},
		values: map[string][]string{"result": {"ok", "error"}}},

	{name: "gpuguard_serve_requests_total", section: "Serving", labels: []string{"code"}},
	{name: "gpuguard_serve_held", section: "Serving"},
	{name: "gpuguard_serve_hold_seconds", section: "Serving", histogram: true},
	{name: "gpuguard_serve_retries_total", section: "Serving"},
	{name: "gpuguard_serve_rejected_total", section: "Serving", labels: []string{"reason"},
		values: map[string][]string{"reason": {"hold", "full"}}},
	{name: "gpuguard_child_ready", section: "Serving"},

	{name: "gpuguard_actions_total", section: "Server actions", labels: []string{"result"},
		values: map[string][]string{"result": {"ok", "failed"}}},
	{name: "gpuguard_action_duration_seconds", section: "Server actions", histogram: true},

	{name: "gpuguard_tasks", section: "Deferred tasks", labels: []string{"state"},
		values: map[string][]string{"state": {"queued", "running", "done", "dead"}}},
	{name: "gpuguard_tasks_total", section: "Deferred tasks", labels: []string{"result"},
		values: map[string][]string{"result": {"done", "failed", "dead", "dropped"}}},
	{name: "gpuguard_task_wait_seconds", section: "Deferred tasks", histogram: true},

	// Making room's other series is gpuguard_stepdowns_total{reason="room"}.
	{name: "gpuguard_room_seconds", section: "Making room", histogram: true},

	// `gpuguard door` has a /metrics of its own: model, the walk's.
	{name: "gpuguard_door_requests_total", section: "One door for many models", labels: []string{"model", "code"}, modelDoor: true},
	{name: "gpuguard_door_request_duration_seconds", section: "One door for many models", histogram: true, labels: []string{"model"}, modelDoor: true},
	{name: "gpuguard_door_instances", section: "One door for many models", modelDoor: true},

	// Beyond the contract: series the operator's docs list.
	{name: "gpuguard_profile_levels", section: "docs"},
	{name: "gpuguard_notify_skipped_total", section: "docs"},
	{name: "gpuguard_journal_dropped_total", section: "docs"},
	{name: "gpuguard_output_dropped_total", section: "docs"},
}

// pendingValues are label values the contract lists whose feature is not
// built: walked like pending series.
var pendingValues = []struct {
	name, label, value, pending string
	built                       func(t *testing.T, e *env) bool
}{}

// exposition is one /metrics exposition: each sample's name and labels.
type exposition []struct {
	name   string
	labels map[string]string
}

var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? \S+$`)
var labelPair = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

func scrapeMetrics(t *testing.T, addr string) exposition {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var s exposition
	for _, l := range strings.Split(string(body), "\n") {
		m := sampleLine.FindStringSubmatch(l)
		if m == nil || strings.HasPrefix(l, "#") {
			continue
		}
		labels := map[string]string{}
		for _, p := range labelPair.FindAllStringSubmatch(m[2], -1) {
			labels[p[1]] = p[2]
		}
		s = append(s, struct {
			name   string
			labels map[string]string
		}{m[1], labels})
	}
	return s
}

// has reports whether a sample of name exists whose labels include want.
func (s exposition) has(name string, want map[string]string) bool {
	for _, x := range s {
		if x.name != name {
			continue
		}
		ok := true
		for k, v := range want {
			if got, found := x.labels[k]; !found || (v != "" && got != v) {
				ok = false
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// walkPolicy: a ladder whose first profile the child leaves by an OOM
// (exit code 3), then a live one, then a sleep through vLLM's API; a
// front door, the default deferred-task store. %s: door, upstream.
const walkPolicy = `
name = "walk"
[watch]
backend  = "sim"
interval = "100ms"
[watermark]
high     = 0.90
critical = 0.99
low      = 0.50
sustain  = "300ms"
grace    = "1s"
[restart]
backoff      = "100ms"
stop_timeout = "10s"
release_timeout = "1s"
[oom]
exit_codes = [3]
[serve]
listen   = "%s"
upstream = "http://%s"
hold     = "60s"
retry    = false
[[profile]]
name = "big"
` + vllmSleepLadder

// TestMetricsContractWalk runs one instance through what makes every
// listed series exist (an OOM fallback, a request through the door, an
// Xid, a rise in usage, a sleep and a wake by request, a reload, a
// request through `gpuguard door`), then walks the list against its live
// /metrics and the model door's: a series the contract lists
// and the exposition lacks fails the test, and so does a pending one
// that has appeared or whose feature has been built.
func TestMetricsContractWalk(t *testing.T) {
	t.Parallel()
	fake := fakeServer(t, "vllm_fake.py")
	e := newEnv(t)
	door, child, metricsAt := freeLoopbackAddr(t), freeLoopbackAddr(t), freeLoopbackAddr(t)
	_, port, _ := net.SplitHostPort(child)
	// The first child exits 3 (an OOM by [oom] exit_codes): the next
	// starts in "awake", the fake server.
	script := `if [ "$GPUGUARD_RESTARTS" = 0 ]; then exit 3; fi; exec /usr/bin/python3 "$@"`
	p := e.start(append([]string{"run", "--policy", e.policy(fmt.Sprintf(walkPolicy, door, child)), "--metrics-addr", metricsAt},
		sh(script, fake, port, "1", strconv.Itoa(fakeAwake), strconv.Itoa(fakeAsleep))...), "VLLM_SERVER_DEV_MODE=1")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gpuguard's stderr:\n%s", p.stderr.String())
		}
	})
	waitFor(t, "the fake's first ready", 60*time.Second, func() bool { return len(events(e, "ready")) >= 1 })
	get := func(what string) {
		t.Helper()
		resp, err := (&http.Client{Timeout: 60 * time.Second}).Get("http://" + door + "/v1/models")
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d", what, resp.StatusCode)
		}
	}
	get("a request through the door")

	simDir := filepath.Join(e.stateDir, "sim")
	if code, _, stderr := e.runRaw([]string{"sim", "xid", "--dir", simDir, "13"}); code != 0 {
		t.Fatalf("sim xid: exit %d %s", code, stderr)
	}
	waitFor(t, "the Xid's count", 30*time.Second, func() bool {
		return scrapeMetrics(t, metricsAt).has("gpuguard_gpu_faults_total", map[string]string{"xid": "13"})
	})

	// A rise from 0.55 at 0.05 a second (below high, no step): the ETA
	// exists only while the usage rises.
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		start := time.Now()
		for {
			r := min(0.55+0.05*time.Since(start).Seconds(), 0.85) - float64(fakeAwake)/float64(16<<30)
			tmp := filepath.Join(simDir, "0", ".ramp.tmp")
			if os.WriteFile(tmp, []byte(strconv.FormatUint(uint64(r*float64(16<<30)), 10)), 0o644) == nil {
				os.Rename(tmp, filepath.Join(simDir, "0", "ramp"))
			}
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	var rising exposition
	waitFor(t, "gpuguard_watermark_eta_seconds while the usage rises", 30*time.Second, func() bool {
		rising = scrapeMetrics(t, metricsAt)
		return rising.has("gpuguard_watermark_eta_seconds", nil)
	})
	close(stop)
	<-done
	os.Remove(filepath.Join(simDir, "0", "ramp"))

	if code, out, stderr := e.run([]string{"step", "walk", "down", "--runtime-dir", e.runDir}); code != 0 || strings.TrimSpace(out) != "asleep" {
		t.Fatalf("step down: exit %d %q %s", code, out, stderr)
	}
	get("a request that wakes the instance")

	// One door for many models: a request naming the instance's model.
	md := e.startGPUGuardDoor()
	waitFor(t, "gpuguard door to route to walk", 30*time.Second, func() bool {
		return call(t, "GET", md.url+"/v1/models/walk", "").status == 200
	})
	if a := call(t, "POST", md.url+"/v1/completions", `{"model":"walk","prompt":"hi"}`); a.status != 200 {
		t.Fatalf("a request through gpuguard door: %d %s", a.status, a.body)
	}
	if code, _, stderr := e.run([]string{"reload", "walk", "--runtime-dir", e.runDir}); code != 0 {
		t.Fatalf("reload: exit %d %s", code, stderr)
	}

	instance, modelDoor := scrapeMetrics(t, metricsAt), scrapeMetrics(t, md.metricsAt)
	for _, s := range contractSeries {
		name := s.name
		if s.histogram {
			name += "_count"
		}
		got := instance
		if s.modelDoor {
			got = modelDoor
		}
		present := got.has(name, nil) || s.name == "gpuguard_watermark_eta_seconds" && rising.has(name, nil)
		if s.pending != "" {
			switch {
			case present:
				t.Errorf("%s (%s) is pending (%s), but /metrics has it now: walk it", s.name, s.section, s.pending)
			case s.built(t, e):
				t.Errorf("%s (%s) is pending (%s), but its feature is built now: exercise it here and walk it", s.name, s.section, s.pending)
			}
			continue
		}
		if !present {
			t.Errorf("/metrics lacks %s (%s)", s.name, s.section)
			continue
		}
		want := map[string]string{}
		for _, l := range s.labels {
			want[l] = ""
		}
		if !got.has(name, want) && !rising.has(name, want) {
			t.Errorf("/metrics has no %s with the labels %v (%s)", s.name, s.labels, s.section)
		}
		for label, values := range s.values {
			for _, v := range values {
				if !got.has(name, map[string]string{label: v}) {
					t.Errorf("/metrics lacks %s{%s=%q} (%s)", s.name, label, v, s.section)
				}
			}
		}
	}
	for _, v := range pendingValues {
		switch {
		case instance.has(v.name, map[string]string{v.label: v.value}):
			t.Errorf("%s{%s=%q} is pending (%s), but /metrics has it now: walk it", v.name, v.label, v.value, v.pending)
		case v.built(t, e):
			t.Errorf("%s{%s=%q} is pending (%s), but its feature is built now: exercise it here and walk it", v.name, v.label, v.value, v.pending)
		}
	}
	// What the run did is what the walk relied on: guard against a run
	// that silently exercised less.
	for _, x := range []struct{ series string }{
		{`gpuguard_oom_fallback_total{from="big",name="walk",to="awake"}`},
		{`gpuguard_stepups_total{name="walk",reason="request"}`},
		{`gpuguard_stepdowns_total{name="walk",reason="manual"}`},
		{`gpuguard_actions_total{name="walk",result="ok"}`},
		{`gpuguard_reloads_total{name="walk",result="ok"}`},
	} {
		if n := pfMetric(t, metricsAt, x.series); n < 1 {
			t.Errorf("%s = %d: the walk's run did not do what it relies on", x.series, n)
		}
	}
	if n := pfMetric(t, md.metricsAt, `gpuguard_door_requests_total{code="200",model="walk"}`); n < 1 {
		t.Errorf(`gpuguard door's gpuguard_door_requests_total{model="walk",code="200"} = %d, want the request counted`, n)
	}
	md.p.signal(sigterm)
	md.p.wait()
	p.signal(sigterm)
	if code := p.wait(); code != 0 {
		t.Errorf("gpuguard exit %d", code)
	}
}

// metricNames are the gpuguard_* names in text, less those that name no
// series (an error type of the door's answers).
func metricNames(text string) []string {
	var names []string
	for _, n := range regexp.MustCompile(`gpuguard_[a-z0-9_]*[a-z0-9]`).FindAllString(text, -1) {
		if n != "gpuguard_unavailable" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// section is the text of the markdown section whose "## " heading starts
// with title, up to the next heading of that level.
func section(t *testing.T, doc, title string) string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "\n## "+title)
	if !ok {
		t.Fatalf("no section %q", title)
	}
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// TestMetricListMatchesDocs holds the walk's list to the docs: the
// metrics table of docs/operations.md names exactly the listed series
// that are built, and, where $GPUGUARD_CONTRACT names the contract
// (CONTRACT.md), its sections name exactly the listed contract series,
// pending ones included.
func TestMetricListMatchesDocs(t *testing.T) {
	t.Parallel()
	var built, contract []string
	for _, s := range contractSeries {
		if s.pending == "" {
			built = append(built, s.name)
		}
		if s.section != "docs" {
			contract = append(contract, s.name)
		}
	}
	slices.Sort(built)
	slices.Sort(contract)

	b, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	var table []string
	for _, l := range strings.Split(section(t, string(b), "Metrics"), "\n") {
		if strings.HasPrefix(l, "| `gpuguard_") {
			cell, _, _ := strings.Cut(strings.TrimPrefix(l, "| "), " |")
			table = append(table, metricNames(cell)...)
		}
	}
	slices.Sort(table)
	if !slices.Equal(table, built) {
		t.Errorf("docs/operations.md's metrics table names\n  %v\nthe walk lists, built,\n  %v", table, built)
	}

	path := os.Getenv("GPUGUARD_CONTRACT")
	if path == "" {
		t.Skip("set GPUGUARD_CONTRACT to the contract (CONTRACT.md) to hold the list to it too")
	}
	b, err = os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var named []string
	for _, title := range []string{"Metrics", "Serving", "Server actions", "Making room", "One door for many models", "Deferred tasks"} {
		for _, n := range metricNames(section(t, string(b), title)) {
			if !slices.Contains(named, n) {
				named = append(named, n)
			}
		}
	}
	slices.Sort(named)
	if !slices.Equal(named, contract) {
		t.Errorf("the contract's sections name\n  %v\nthe walk lists\n  %v", named, contract)
	}
}
