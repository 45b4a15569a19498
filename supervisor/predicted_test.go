package supervisor

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
	t0 := time.Unix(1_000_000, 0)
	type obs struct {
		at        time.Duration
		ratio     float64
		predicted bool
		level     int
		want      verdict
	}
	tests := []struct {
		name   string
		levels int
		obs    []obs
	}{
		{"predicted for sustain steps down", 3, []obs{
			{0, 0.85, true, 0, holdSteady},
			{999 * time.Millisecond, 0.86, true, 0, holdSteady},
			{time.Second, 0.86, true, 0, stepDownPredicted},
		}},
		{"a break in the prediction restarts sustain", 3, []obs{
			{0, 0.85, true, 0, holdSteady},
			{500 * time.Millisecond, 0.85, false, 0, holdSteady},
			{600 * time.Millisecond, 0.85, true, 0, holdSteady},
			{1500 * time.Millisecond, 0.86, true, 0, holdSteady},
			{1600 * time.Millisecond, 0.86, true, 0, stepDownPredicted},
		}},
		{"below low never predicts", 3, []obs{
			{0, 0.65, true, 0, holdSteady},
			{5 * time.Second, 0.69, true, 0, holdSteady},
		}},
		{"exactly low counts", 3, []obs{
			{0, 0.70, true, 0, holdSteady},
			{time.Second, 0.70, true, 0, stepDownPredicted},
		}},
		{"above high for sustain is a watermark step, not predicted", 3, []obs{
			{0, 0.92, true, 0, holdSteady},
			{time.Second, 0.93, true, 0, stepDownLive},
		}},
		{"predicted before high's own sustain", 3, []obs{
			{0, 0.88, true, 0, holdSteady},
			{500 * time.Millisecond, 0.91, true, 0, holdSteady},
			{time.Second, 0.92, true, 0, stepDownPredicted},
		}},
		{"nothing within grace, then sustain again", 3, []obs{
			{0, 0.85, true, 0, holdSteady},
			{time.Second, 0.86, true, 0, stepDownPredicted},
			{5 * time.Second, 0.88, true, 1, holdSteady},
			{11 * time.Second, 0.88, true, 1, stepDownPredicted},
		}},
		{"never at the last profile", 2, []obs{
			{0, 0.85, true, 1, holdSteady},
			{3 * time.Second, 0.89, true, 1, holdSteady},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w watermarkRules
			for i, o := range tt.obs {
				got := w.observe(t0.Add(o.at), o.ratio, o.predicted, wm, o.level, tt.levels)
				if got != o.want {
					t.Fatalf("observation %d (t=%s ratio=%.2f predicted=%v): got %s, want %s", i, o.at, o.ratio, o.predicted, got, o.want)
				}
				if got == stepDownPredicted || got == stepDownLive {
					w.stepped(t0.Add(o.at))
				}
			}
		})
	}
}

func TestPredictedStepIsPending(t *testing.T) {
	wm := policy.Watermark{High: 0.9, Critical: 0.97, Low: 0.7, Sustain: time.Second, Grace: time.Second, Lead: time.Minute}
	var w watermarkRules
	w.observe(time.Unix(0, 0), 0.8, true, wm, 0, 3)
	if !w.stepPending() {
		t.Fatal("a predicted step building up is a pending step (admission refuses leases)")
	}
	w.gap()
	if w.stepPending() {
		t.Fatal("a missing sample restarts the prediction's sustain")
	}
}
