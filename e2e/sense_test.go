package e2e

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A ramp for predicted step-downs: the default adaptive polling, lead 5 s.
const rampPolicy = `
[watch]
backend = "sim"
[watermark]
lead = "5s"
sustain = "1s"
grace = "5s"
[[profile]]
name = "fp16"
live = true
[[profile]]
name = "int8"
live = true
[[profile]]
name = "int4"
live = true
`

// TestPredictedStepOnARamp: the test raises the sim GPU's usage (a tenant
// file, rewritten every 10 ms) from 0.55 at 0.03 a second; with lead 5 s
// the real binary steps down before the usage reaches high (0.90, 11.7 s
// in), with reason predicted in the journal and the report, and its status
// shows the ETA while the usage rises.
func TestPredictedStepOnARamp(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// At the notification the child also reports the usage then (the ramp
	// file's bytes): the test reads its lines later, after its own status
	// runs, while the ramp goes on rising.
	script := `trap 'exit 0' TERM; trap 'echo "notified $(cat "$GPUGUARD_STATE") at $(cat "$GPUGUARD_SIM_DIR/0/ramp")"' USR1; echo up; while :; do sleep 0.02; done`
	p := e.start(append([]string{"run", "--policy", e.policy(rampPolicy), "--name", "ramp"}, sh(script)...))
	p.expect("up")

	var ratio atomic.Uint64 // float64 bits: what the test wrote last
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		dir := filepath.Join(e.stateDir, "sim", "0")
		start := time.Now()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			r := 0.55 + 0.03*time.Since(start).Seconds()
			// As gpu.SimSet does: a temp name (ignored), then rename.
			tmp := filepath.Join(dir, ".ramp.tmp")
			if os.WriteFile(tmp, []byte(strconv.FormatUint(uint64(r*float64(16<<30)), 10)), 0o644) == nil {
				os.Rename(tmp, filepath.Join(dir, "ramp"))
			}
			ratio.Store(math.Float64bits(r))
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	defer func() { close(stop); <-done }()

	// While it rises (past low), status has an ETA and the table shows it.
	var eta float64
	for deadline := time.Now().Add(time.Minute); eta == 0; {
		if time.Now().After(deadline) {
			t.Fatal("no eta_seconds in status within a minute of rising")
		}
		if math.Float64frombits(ratio.Load()) < 0.72 {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		_, out, _ := e.run([]string{"status", "ramp", "--json", "--runtime-dir", e.runDir})
		var st struct {
			Instances []struct {
				ETA      *float64 `json:"eta_seconds"`
				Interval float64  `json:"interval_seconds"`
			} `json:"instances"`
		}
		if err := json.Unmarshal([]byte(out), &st); err == nil && len(st.Instances) == 1 && st.Instances[0].ETA != nil {
			eta = *st.Instances[0].ETA
			if iv := st.Instances[0].Interval; iv <= 0 || iv > 0.2 {
				t.Errorf("interval_seconds %v while rising, want (0, 0.2]", iv)
			}
		}
	}
	if eta <= 0 || eta > 20 {
		t.Errorf("eta_seconds %v at 0.72+ rising 0.03/s, want about 8", eta)
	}
	if _, out, _ := e.run([]string{"status", "--runtime-dir", e.runDir}); !strings.Contains(out, "POLL") || !strings.Contains(out, "ETA") {
		t.Errorf("the status table has no POLL and ETA columns:\n%s", out)
	}

	l := p.expect("notified")
	// The usage when the child was notified: at or after the step, so
	// below high here means the step came before high.
	_, used, _ := strings.Cut(l, " at ")
	b, err := strconv.ParseUint(strings.TrimSpace(used), 10, 64)
	if err != nil {
		t.Fatalf("the child's notification %q has no usage: %v", l, err)
	}
	at := float64(b) / float64(16<<30)
	if !strings.Contains(l, `"profile":"int8"`) {
		t.Errorf("the child read %s", l)
	}
	if at >= 0.90 {
		t.Errorf("the step came with usage at %.3f: not before high", at)
	}
	p.signal(15)
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	var predicted []map[string]any
	for _, ev := range journal(t, e) {
		if ev["event"] == "stepdown" {
			predicted = append(predicted, ev)
		}
	}
	if len(predicted) != 1 || predicted[0]["reason"] != "predicted" {
		t.Fatalf("journal stepdowns %v, want one predicted", predicted)
	}
	_, out, _ := e.run([]string{"report", "ramp", "--json", "--state-dir", e.stateDir, "--runtime-dir", e.runDir})
	var rep struct {
		ByReason map[string]int `json:"stepdowns_by_reason"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.ByReason["predicted"] != 1 {
		t.Errorf("report --json does not count the predicted step (%v): %s", err, out)
	}
}
