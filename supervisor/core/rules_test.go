package core

import (
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/policy"
)

func TestWatermarkRules(t *testing.T) {
	wm := policy.Watermark{High: 0.90, Critical: 0.97, Low: 0.70,
		Sustain: time.Second, Grace: 10 * time.Second, RecoverAfter: 5 * time.Second}
	type obs struct {
		at    time.Duration
		ratio float64
		level int
		want  Verdict
		step  bool // the caller performs the step
	}
	tests := []struct {
		name   string
		levels int
		wm     policy.Watermark
		obs    []obs
	}{
		{"below high holds", 3, wm, []obs{{0, 0.5, 0, Hold, false}, {5 * time.Second, 0.89, 0, Hold, false}}},
		{"exactly high is not above", 3, wm, []obs{{0, 0.90, 0, Hold, false}, {2 * time.Second, 0.90, 0, Hold, false}}},
		{"above high for sustain steps down", 3, wm, []obs{
			{0, 0.93, 0, Hold, false},
			{999 * time.Millisecond, 0.93, 0, Hold, false},
			{time.Second, 0.93, 0, StepDown, true},
		}},
		{"a dip below high restarts sustain", 3, wm, []obs{
			{0, 0.93, 0, Hold, false},
			{800 * time.Millisecond, 0.80, 0, Hold, false},
			{1200 * time.Millisecond, 0.93, 0, Hold, false},
			{2100 * time.Millisecond, 0.93, 0, Hold, false},
			{2200 * time.Millisecond, 0.93, 0, StepDown, true},
		}},
		{"zero sustain steps on the first sample", 3, policy.Watermark{High: 0.9, Critical: 0.97, Low: 0.7, Grace: time.Second},
			[]obs{{0, 0.95, 0, StepDown, true}}},
		{"no second step within grace", 3, wm, []obs{
			{0, 0.93, 0, Hold, false},
			{time.Second, 0.93, 0, StepDown, true},
			{5 * time.Second, 0.93, 1, Hold, false},
			{10*time.Second + 999*time.Millisecond, 0.93, 1, Hold, false},
		}},
		{"still critical after grace restarts lower", 3, wm, []obs{
			{0, 0.98, 0, Hold, false},
			{time.Second, 0.98, 0, StepDown, true},
			{6 * time.Second, 0.98, 1, Hold, false},
			{11 * time.Second, 0.98, 1, RestartLower, true},
		}},
		{"below critical after grace but above high steps again after sustain", 3, wm, []obs{
			{0, 0.93, 0, Hold, false},
			{time.Second, 0.93, 0, StepDown, true},
			{11 * time.Second, 0.93, 1, Hold, false},
			{11*time.Second + 999*time.Millisecond, 0.93, 1, Hold, false},
			{12 * time.Second, 0.93, 1, StepDown, true},
		}},
		{"critical checked once per step", 3, wm, []obs{
			{0, 0.93, 0, Hold, false},
			{time.Second, 0.93, 0, StepDown, true},
			{11 * time.Second, 0.5, 1, Hold, false},
			{12 * time.Second, 0.99, 1, Hold, false},
		}},
		{"last profile above critical is reported once per grace", 2, wm, []obs{
			{0, 0.99, 1, Hold, false},
			{time.Second, 0.99, 1, CriticalAtLast, false},
			{2 * time.Second, 0.99, 1, Hold, false},
			{11 * time.Second, 0.99, 1, CriticalAtLast, false},
		}},
		{"last profile above high but below critical holds", 2, wm, []obs{
			{0, 0.95, 1, Hold, false}, {3 * time.Second, 0.95, 1, Hold, false},
		}},
		{"critical after a step at the last profile does not restart", 2, wm, []obs{
			{0, 0.99, 0, Hold, false},
			{time.Second, 0.99, 0, StepDown, true},
			{11 * time.Second, 0.99, 1, Hold, false},
		}},
		{"below low for recover_after steps up", 3, wm, []obs{
			{0, 0.5, 1, Hold, false},
			{4 * time.Second, 0.5, 1, Hold, false},
			{5 * time.Second, 0.5, 1, StepUp, true},
		}},
		{"no step up at the first profile", 3, wm, []obs{{0, 0.1, 0, Hold, false}, {time.Minute, 0.1, 0, Hold, false}}},
		{"recover_after 0 disables step up", 3, policy.Watermark{High: 0.9, Critical: 0.97, Low: 0.7, Sustain: time.Second, Grace: time.Second},
			[]obs{{0, 0.1, 2, Hold, false}, {time.Hour, 0.1, 2, Hold, false}}},
		// A ratio below 0 stands for a missing sample (a failed probe call).
		{"a missing sample restarts sustain", 3, wm, []obs{
			{0, 0.93, 0, Hold, false},
			{900 * time.Millisecond, -1, 0, Hold, false},
			{time.Second, 0.93, 0, Hold, false},
			{1999 * time.Millisecond, 0.93, 0, Hold, false},
			{2 * time.Second, 0.93, 0, StepDown, true},
		}},
		{"a flapping probe never sustains", 3, wm, []obs{
			{0, 0.99, 0, Hold, false},
			{600 * time.Millisecond, -1, 0, Hold, false},
			{1200 * time.Millisecond, 0.99, 0, Hold, false},
			{1800 * time.Millisecond, -1, 0, Hold, false},
			{2400 * time.Millisecond, 0.99, 0, Hold, false},
			{3000 * time.Millisecond, -1, 0, Hold, false},
			{3600 * time.Millisecond, 0.99, 0, Hold, false},
		}},
		{"a missing sample restarts recovery", 3, wm, []obs{
			{0, 0.5, 1, Hold, false},
			{4 * time.Second, -1, 1, Hold, false},
			{5 * time.Second, 0.5, 1, Hold, false},
			{9999 * time.Millisecond, 0.5, 1, Hold, false},
			{10 * time.Second, 0.5, 1, StepUp, true},
		}},
		{"grace runs on through missing samples", 3, wm, []obs{
			{0, 0.98, 0, Hold, false},
			{time.Second, 0.98, 0, StepDown, true},
			{5 * time.Second, -1, 1, Hold, false},
			{11 * time.Second, 0.98, 1, RestartLower, true},
		}},
		{"no step up within grace of a step down", 3, wm, []obs{
			{0, 0.95, 0, Hold, false},
			{time.Second, 0.95, 0, StepDown, true},
			{2 * time.Second, 0.2, 1, Hold, false},
			{10 * time.Second, 0.2, 1, Hold, false},
			// low since 2s, but grace lasts until 11s
			{11 * time.Second, 0.2, 1, StepUp, true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w Rules
			for i, o := range tt.obs {
				if o.ratio < 0 {
					w.Gap()
					continue
				}
				got := w.Observe(at(o.at), o.ratio, false, tt.wm, o.level, tt.levels)
				if got != o.want {
					t.Fatalf("observation %d (t=%s ratio=%.2f level=%d): got %s, want %s", i, o.at, o.ratio, o.level, got, o.want)
				}
				if o.step {
					w.Stepped(at(o.at))
				}
			}
		})
	}
}

func TestStepPending(t *testing.T) {
	wm := policy.Watermark{High: 0.9, Critical: 0.97, Low: 0.7, Sustain: time.Second, Grace: time.Second}
	var w Rules
	now := time.Unix(0, 0)
	w.Observe(now, 0.5, false, wm, 0, 3)
	if w.StepPending() {
		t.Fatal("below high: no step pending")
	}
	w.Observe(now, 0.95, false, wm, 0, 3)
	if !w.StepPending() {
		t.Fatal("above high within sustain: a step is pending")
	}
}
