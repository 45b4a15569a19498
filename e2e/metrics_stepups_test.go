package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// stepupPolicy is two live profiles on an empty sim GPU; %s is
// recover_after.
const stepupPolicy = `
name = "up"
[watch]
backend  = "sim"
interval = "50ms"
[watermark]
sustain = "100ms"
grace   = "1s"
recover_after = %q
[[profile]]
name = "fp16"
live = true
[[profile]]
name = "int8"
live = true
`

// stepups reads gpuguard_stepups_total of instance "up" by reason.
func stepups(t *testing.T, addr string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, r := range []string{"recovered", "manual", "request"} {
		out[r] = pfMetric(t, addr, fmt.Sprintf(`gpuguard_stepups_total{name="up",reason=%q}`, r))
	}
	return out
}

// startStepupRun runs an idle child under stepupPolicy with metrics on,
// and steps it down by hand: from there it can only come back up.
func startStepupRun(t *testing.T, recoverAfter string) (e *env, p *proc, metricsAt string) {
	t.Helper()
	e = newEnv(t)
	metricsAt = freeLoopbackAddr(t)
	p = e.start(append([]string{"run", "--policy", e.policy(fmt.Sprintf(stepupPolicy, recoverAfter)), "--metrics-addr", metricsAt}, sh(idle)...))
	p.expect("up fp16")
	if got := stepups(t, metricsAt); got["recovered"]+got["manual"]+got["request"] != 0 {
		t.Fatalf("stepups before any step up: %v", got)
	}
	if code, out, stderr := e.run([]string{"step", "up", "down", "--runtime-dir", e.runDir}); code != 0 || strings.TrimSpace(out) != "int8" {
		t.Fatalf("step down: exit %d %q %s", code, out, stderr)
	}
	return e, p, metricsAt
}

// TestStepUpCountedManual: `gpuguard step NAME up` counts one
// gpuguard_stepups_total{reason="manual"}, read from a live /metrics.
func TestStepUpCountedManual(t *testing.T) {
	t.Parallel()
	e, p, metricsAt := startStepupRun(t, "0s")
	if code, out, stderr := e.run([]string{"step", "up", "up", "--runtime-dir", e.runDir}); code != 0 || strings.TrimSpace(out) != "fp16" {
		t.Fatalf("step up: exit %d %q %s", code, out, stderr)
	}
	if got := stepups(t, metricsAt); got["manual"] != 1 || got["recovered"] != 0 || got["request"] != 0 {
		t.Errorf("gpuguard_stepups_total after one step up by hand: %v, want manual 1 and no other", got)
	}
	p.signal(sigterm)
	p.wait()
}

// TestStepUpCountedRecovered: after a step down, an empty GPU (below low
// for recover_after) steps the instance back up, and that counts one
// gpuguard_stepups_total{reason="recovered"}.
func TestStepUpCountedRecovered(t *testing.T) {
	t.Parallel()
	_, p, metricsAt := startStepupRun(t, "300ms")
	waitFor(t, "the recovery's step up in /metrics", 30*time.Second, func() bool { return stepups(t, metricsAt)["recovered"] >= 1 })
	if got := stepups(t, metricsAt); got["recovered"] != 1 || got["manual"] != 0 || got["request"] != 0 {
		t.Errorf("gpuguard_stepups_total after one recovery: %v, want recovered 1 and no other", got)
	}
	p.signal(sigterm)
	p.wait()
}
