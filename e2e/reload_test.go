package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// reloadPolicy is a three-profile ladder on the sim backend; the fields
// are what the test changes between reloads.
type reloadPolicy struct {
	name     string
	priority int
	high     float64
	listen   string
	ladder   []string // profile names; all but the first are live
}

func (p reloadPolicy) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "name = %q\npriority = %d\n", p.name, p.priority)
	fmt.Fprintf(&b, "[watch]\nbackend = \"sim\"\ninterval = \"50ms\"\n")
	fmt.Fprintf(&b, "[watermark]\nhigh = %v\nlow = 0.5\nsustain = \"0s\"\ngrace = \"300ms\"\n", p.high)
	fmt.Fprintf(&b, "[restart]\nbackoff = \"10ms\"\nstop_timeout = \"5s\"\nrelease_timeout = \"1s\"\n")
	fmt.Fprintf(&b, "[metrics]\nlisten = %q\n", p.listen)
	for i, n := range p.ladder {
		fmt.Fprintf(&b, "[[profile]]\nname = %q\nlive = %v\n", n, i > 0)
	}
	return b.String()
}

// lineOf is the 1-based line of the first line of text that starts with
// prefix.
func lineOf(t *testing.T, text, prefix string) int {
	t.Helper()
	for i, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			return i + 1
		}
	}
	t.Fatalf("no line starts with %q", prefix)
	return 0
}

// TestReload drives `gpuguard reload` against a running instance after
// editing its policy file: the changed keys are printed and journaled,
// counted in gpuguard_reloads_total, a new metrics address and priority
// apply at once; an invalid file or a new name changes nothing (78, every
// problem with file:line); a profile that is gone restarts the child with
// GPUGUARD_LAST_EXIT=reload; a lower high steps down at once.
func TestReload(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b := freeLoopbackAddr(t), freeLoopbackAddr(t)
	pol := reloadPolicy{name: "rl", high: 0.9, listen: a, ladder: []string{"fp16", "int8", "int4"}}
	path := e.policy(pol.String())
	script := `trap 'exit 0' TERM; trap 'echo "notified"' USR1; echo "up $GPUGUARD_PROFILE $GPUGUARD_LAST_EXIT"; while :; do sleep 0.02; done`
	p := e.start(append([]string{"run", "--policy", path}, sh(script)...))
	p.expect("up fp16 none")
	waitFor(t, "metrics on "+a, 30*time.Second, func() bool { return scrape(t, a) != "" })
	reload := func() (int, string, string) {
		return e.run([]string{"reload", "rl", "--runtime-dir", e.runDir})
	}

	// Priority and the metrics address apply at once.
	pol.priority, pol.listen = -5, b
	e.policy(pol.String())
	code, out, stderr := reload()
	if code != 0 || out != "rl: policy reloaded, changed: priority, metrics.listen\n" {
		t.Fatalf("reload: exit %d, out %q, stderr %s", code, out, stderr)
	}
	if m := scrape(t, b); !strings.Contains(m, `gpuguard_reloads_total{name="rl",result="ok"} 1`) {
		t.Errorf("metrics on the new address %s:\n%s", b, m)
	}
	waitFor(t, "the old metrics address to go", 30*time.Second, func() bool { return scrape(t, a) == "" })
	waitFor(t, "the new priority in the tenant file", 30*time.Second, func() bool {
		files, _ := filepath.Glob(filepath.Join(e.runDir, "gpus", "*", "t.rl"))
		if len(files) != 1 {
			return false
		}
		var info struct{ Priority int }
		b, _ := os.ReadFile(files[0])
		return json.Unmarshal(b, &info) == nil && info.Priority == -5
	})
	var rel []string
	waitFor(t, "the reload event", 30*time.Second, func() bool { rel = events(e, "reload"); return len(rel) == 1 })
	if !strings.Contains(rel[0], `"changed":["priority","metrics.listen"]`) {
		t.Errorf("reload event %s", rel[0])
	}

	// Invalid: 78, each problem with file:line and key; nothing changes.
	bad := pol
	bad.high, bad.priority = 0.99, 5000
	e.policy(bad.String())
	code, out, stderr = reload()
	text := bad.String()
	wantAll(t, "invalid reload: stderr", stderr,
		fmt.Sprintf("%s:%d: priority: ", path, lineOf(t, text, "priority")),
		fmt.Sprintf("%s:%d: watermark.high: must be below watermark.critical", path, lineOf(t, text, "high")),
		`instance "rl" kept its policy: 2 problems refused, nothing changed`,
	)
	if code != 78 || out != "" {
		t.Fatalf("invalid reload: exit %d out %q, want 78", code, out)
	}
	if m := scrape(t, b); !strings.Contains(m, `gpuguard_reloads_total{name="rl",result="error"} 1`) {
		t.Errorf("the refused reload is not counted:\n%s", m)
	}
	if code, out, _ := e.run([]string{"status", "rl", "--json", "--runtime-dir", e.runDir}); code != 0 || !strings.Contains(out, `"priority": -5`) {
		t.Errorf("status after a refused reload: %d\n%s", code, out)
	}

	// A new name is refused like an invalid file.
	renamed := pol
	renamed.name = "other"
	e.policy(renamed.String())
	if code, _, stderr := reload(); code != 78 || !strings.Contains(stderr, fmt.Sprintf("%s:1: name: would rename the instance", path)) {
		t.Errorf("renaming reload: exit %d, stderr %s", code, stderr)
	}

	// The running profile is gone: a graceful restart into the next.
	pol.ladder = []string{"int8", "int4"}
	e.policy(pol.String())
	if code, out, stderr := reload(); code != 0 || out != "rl: policy reloaded, changed: profile\n" {
		t.Fatalf("ladder reload: exit %d, out %q, stderr %s", code, out, stderr)
	}
	p.expect("up int8 reload")

	// A lower high steps down at once (sustain 0): 14 GiB of 16 is 0.875.
	if code, _, stderr := e.run([]string{"sim", "set", "--dir", filepath.Join(e.stateDir, "sim"), "other", "14GiB"}); code != 0 {
		t.Fatalf("sim set: %s", stderr)
	}
	pol.high = 0.85
	e.policy(pol.String())
	if code, out, _ := reload(); code != 0 || out != "rl: policy reloaded, changed: watermark.high\n" {
		t.Fatalf("threshold reload: exit %d, out %q", code, out)
	}
	waitFor(t, "the step down", 30*time.Second, func() bool { return len(events(e, "stepdown")) == 1 })

	if code, _, stderr := e.run([]string{"reload", "nope", "--runtime-dir", e.runDir}); code != 1 || !strings.Contains(stderr, `no such instance "nope"`) {
		t.Errorf("reload of no instance: exit %d, %s", code, stderr)
	}
	p.signal(15)
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d\n%s", code, p.stderr.String())
	}
	var restarts []map[string]any
	for _, ev := range journal(t, e) {
		if ev["event"] == "restart" {
			restarts = append(restarts, ev)
		}
	}
	if len(restarts) != 1 || restarts[0]["reason"] != "reload" || restarts[0]["from"] != "fp16" {
		t.Errorf("restart events %v, want one of reason reload from fp16", restarts)
	}
	rel = events(e, "reload")
	if len(rel) != 5 || !strings.Contains(rel[1], `"reason":"error"`) || !strings.Contains(rel[2], `"reason":"error"`) {
		t.Errorf("reload events:\n%s", strings.Join(rel, "\n"))
	}
}

// TestReloadWithoutPolicyFile: an instance started on the built-in
// defaults has nothing to re-read: every reload is refused (78), even once
// a ./policy.toml exists.
func TestReloadWithoutPolicyFile(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.start(append([]string{"run", "--backend", "sim", "--name", "bare"}, sh(idle)...))
	p.expect("up default")
	e.policy("[watermark]\nhigh = 0.8\n") // ./policy.toml in its working dir
	code, out, stderr := e.run([]string{"reload", "bare", "--runtime-dir", e.runDir})
	if code != 78 || out != "" || !strings.Contains(stderr, "built-in defaults") {
		t.Errorf("reload: exit %d out %q stderr %s", code, out, stderr)
	}
	p.signal(15)
	p.wait()
}
