package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gpuguard/gpuguard/api"
)

// TestDegradedRate: the degraded rate measures against the ladder's first
// profile (level 0), the fallback rate against the first profile started.
// An instance whose best profile never fits is degraded all the time with
// a fallback rate of 0, and only the degraded rate flags it.
func TestDegradedRate(t *testing.T) {
	tests := []struct {
		name               string
		events             []api.Event
		fallback, degraded float64
		over               bool
		most               string
	}{
		{"always in the best profile", []api.Event{start(0, "fp16", 0, 0), exit(100, "fp16", 0)}, 0, 0, false, ""},
		{"fp16 never fits", []api.Event{start(0, "int8", 1, 0), exit(100, "int8", 1)}, 0, 1, true, "int8"},
		{"started below, fell further", []api.Event{
			start(0, "int8", 1, 0),
			step(60, api.EventStepDown, api.ReasonWatermark, "int8", 1, "int4", 2),
			exit(100, "int4", 2),
		}, 0.4, 1, true, "int8"},
		{"started at the best, a short fall", []api.Event{
			start(0, "fp16", 0, 0),
			step(97, api.EventStepDown, api.ReasonWatermark, "fp16", 0, "int8", 1),
			exit(100, "int8", 1),
		}, 0.03, 0.03, false, "int8"},
		{"back up again", []api.Event{
			start(0, "fp16", 0, 0),
			step(10, api.EventStepDown, api.ReasonWatermark, "fp16", 0, "int4", 2),
			step(20, api.EventStepUp, api.ReasonRecovered, "int4", 2, "int8", 1),
			step(50, api.EventStepUp, api.ReasonRecovered, "int8", 1, "fp16", 0),
			exit(100, "fp16", 0),
		}, 0.4, 0.4, true, "int8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Summarize(tt.events, at(100), false)
			if !near(s.FallbackRate, tt.fallback) || !near(s.DegradedRate, tt.degraded) {
				t.Errorf("fallback %.3f degraded %.3f, want %.3f %.3f", s.FallbackRate, s.DegradedRate, tt.fallback, tt.degraded)
			}
			if s.Budget != DefaultBudget || s.OverBudget != tt.over {
				t.Errorf("budget %v over %v, want %v %v", s.Budget, s.OverBudget, DefaultBudget, tt.over)
			}
			if got := s.MostDegraded(); got != tt.most {
				t.Errorf("most degraded %q, want %q", got, tt.most)
			}
		})
	}
}

// TestBudget: --budget moves the line; the rate must be above it, not at it.
func TestBudget(t *testing.T) {
	s := Summarize([]api.Event{
		start(0, "fp16", 0, 0),
		step(90, api.EventStepDown, api.ReasonWatermark, "fp16", 0, "int8", 1),
		exit(100, "int8", 1),
	}, at(100), false)
	for _, c := range []struct {
		budget float64
		over   bool
	}{{0.05, true}, {0.1, false}, {0.2, false}, {0, true}} {
		s.SetBudget(c.budget)
		if s.OverBudget != c.over {
			t.Errorf("budget %v: over %v, want %v (degraded %v)", c.budget, s.OverBudget, c.over, s.DegradedRate)
		}
	}
}

// TestTextNeverFits is issue 27's point 4: fp16 never fits, so every start
// is in int8; the text report says the time is degraded and warns, naming
// int8, though the fallback rate is 0.
func TestTextNeverFits(t *testing.T) {
	s := Summarize([]api.Event{start(0, "int8b", 1, 0), exit(100, "int8b", 1)}, at(100), false)
	s.Name = "alpha"
	var buf bytes.Buffer
	if err := s.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"fallback rate  0.0% of supervised time below int8b (the first profile started)",
		"degraded rate  100.0% of supervised time below level 0 (the ladder's first profile; budget 5.0%)",
		"warning: alpha ran below its best profile level 0 100.0% of the time (budget 5.0%), mostly in int8b",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
}

// TestVerdict: the sentence the review page shows, in each case.
func TestVerdict(t *testing.T) {
	idle := Summarize(nil, at(100), false)
	idle.Name = "idle"
	if v := idle.Verdict(); !strings.Contains(v, "did not run a child") {
		t.Errorf("no supervised time: %q", v)
	}
	ok := Summarize([]api.Event{start(0, "fp16", 0, 0), exit(100, "fp16", 0)}, at(100), false)
	ok.Name = "ok"
	if v := ok.Verdict(); v != "ok ran below its best profile fp16 0.0% of the time, within the budget of 5.0%" {
		t.Errorf("within budget: %q", v)
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// TestWatermarkRecordsNotCounted: per-minute watermark records are
// bookkeeping, like totals records: no event count, no effect on time.
func TestWatermarkRecordsNotCounted(t *testing.T) {
	rec := func(s int) api.Event {
		return api.Event{Time: at(s), Event: api.EventWatermark, Profile: "fp16", Minute: &api.Minute{Max: 0.5, Samples: 10}}
	}
	with := Summarize([]api.Event{start(0, "fp16", 0, 0), rec(60), rec(120), exit(150, "fp16", 0), rec(150)}, at(200), false)
	without := Summarize([]api.Event{start(0, "fp16", 0, 0), exit(150, "fp16", 0)}, at(200), false)
	if with.Events != 2 || with.SupervisedSeconds != without.SupervisedSeconds || with.SecondsInProfile["fp16"] != 150 {
		t.Errorf("with records: %d events, %v s; without: %d, %v s", with.Events, with.SupervisedSeconds, without.Events, without.SupervisedSeconds)
	}
}

// TestBestProfileFromFit: a profile that never ran is named by the fit
// events, which list every profile a start tried, the newest winning.
func TestBestProfileFromFit(t *testing.T) {
	fit := func(s int, first string) api.Event {
		return api.Event{Time: at(s), Event: api.EventFit, Profile: "int8", Level: 1,
			Tried: []api.FitTry{{Profile: first, Level: 0, NeedsBytes: 40 << 30}, {Profile: "int8", Level: 1, Fits: true}}}
	}
	s := Summarize([]api.Event{fit(0, "fp16"), start(0, "int8", 1, 0), exit(50, "int8", 1),
		fit(60, "bf16"), start(60, "int8", 1, 0), exit(100, "int8", 1)}, at(100), false)
	if got := s.BestProfile(); got != "bf16" {
		t.Errorf("best profile %q, want bf16 (the newest fit's level 0)", got)
	}
	s.Name = "alpha"
	if v := s.Verdict(); !strings.Contains(v, "alpha ran below its best profile bf16 100.0% of the time") {
		t.Errorf("verdict %q", v)
	}
}
