package core

import (
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/policy"
)

// TestPredictedRule: the predicted step-down as a verdict. The trend's
// condition (trend.Predicts) arrives as a flag; the rule adds the level
// (at or above low), sustain, grace and the end of the ladder.
func TestPredictedRule(t *testing.T) {
	wm := policy.Watermark{High: 0.90, Critical: 0.97, Low: 0.70,
		Sustain: time.Second, Grace: 10 * time.Second, Lead: 5 * time.Second}
	type obs struct {
		at        time.Duration
		ratio     float64
		predicted bool
		level     int
		want      Verdict
	}
	tests := []struct {
		name   string
		levels int
		obs    []obs
	}{
		{"predicted for sustain steps down", 3, []obs{
			{0, 0.85, true, 0, Hold},
			{999 * time.Millisecond, 0.86, true, 0, Hold},
			{time.Second, 0.86, true, 0, StepDownPredicted},
		}},
		{"a break in the prediction restarts sustain", 3, []obs{
			{0, 0.85, true, 0, Hold},
			{500 * time.Millisecond, 0.85, false, 0, Hold},
			{600 * time.Millisecond, 0.85, true, 0, Hold},
			{1500 * time.Millisecond, 0.86, true, 0, Hold},
			{1600 * time.Millisecond, 0.86, true, 0, StepDownPredicted},
		}},
		{"below low never predicts", 3, []obs{
			{0, 0.65, true, 0, Hold},
			{5 * time.Second, 0.69, true, 0, Hold},
		}},
		{"exactly low counts", 3, []obs{
			{0, 0.70, true, 0, Hold},
			{time.Second, 0.70, true, 0, StepDownPredicted},
		}},
		{"above high for sustain is a watermark step, not predicted", 3, []obs{
			{0, 0.92, true, 0, Hold},
			{time.Second, 0.93, true, 0, StepDown},
		}},
		{"predicted before high's own sustain", 3, []obs{
			{0, 0.88, true, 0, Hold},
			{500 * time.Millisecond, 0.91, true, 0, Hold},
			{time.Second, 0.92, true, 0, StepDownPredicted},
		}},
		{"nothing within grace, then sustain again", 3, []obs{
			{0, 0.85, true, 0, Hold},
			{time.Second, 0.86, true, 0, StepDownPredicted},
			{5 * time.Second, 0.88, true, 1, Hold},
			{11 * time.Second, 0.88, true, 1, StepDownPredicted},
		}},
		{"never at the last profile", 2, []obs{
			{0, 0.85, true, 1, Hold},
			{3 * time.Second, 0.89, true, 1, Hold},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w Rules
			for i, o := range tt.obs {
				got := w.Observe(t0.Add(o.at), o.ratio, o.predicted, wm, o.level, tt.levels)
				if got != o.want {
					t.Fatalf("observation %d (t=%s ratio=%.2f predicted=%v): got %s, want %s", i, o.at, o.ratio, o.predicted, got, o.want)
				}
				if got == StepDownPredicted || got == StepDown {
					w.Stepped(t0.Add(o.at))
				}
			}
		})
	}
}

func TestPredictedStepIsPending(t *testing.T) {
	wm := policy.Watermark{High: 0.9, Critical: 0.97, Low: 0.7, Sustain: time.Second, Grace: time.Second, Lead: time.Minute}
	var w Rules
	w.Observe(time.Unix(0, 0), 0.8, true, wm, 0, 3)
	if !w.StepPending() {
		t.Fatal("a predicted step building up is a pending step (admission refuses leases)")
	}
	w.Gap()
	if w.StepPending() {
		t.Fatal("a missing sample restarts the prediction's sustain")
	}
}
