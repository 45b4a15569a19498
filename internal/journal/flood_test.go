package journal

import (
	"maps"
	"path/filepath"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/report"
)

// flood runs an instance through a journal on disk: a start in fp16,
// perSecond granted admissions every second for seconds, a live step-down
// to int8 at stepAt, and an exit at the end. It returns the journal's
// surviving lines and when the run ended.
func flood(t *testing.T, opts Options, seconds, perSecond, stepAt int) ([]api.Event, time.Time) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "events.jsonl")
	opts.Totals, opts.Name, opts.Logf = report.NewTally(time.Now()), "llama", t.Logf
	j, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	profile, level := "fp16", 0
	emit := func(ev api.Event) {
		ev.Time, ev.Name = time.Now(), "llama"
		if ev.Profile == "" {
			ev.Profile, ev.Level = profile, level
		}
		j.Observe(ev)
	}
	emit(api.Event{Event: api.EventStart, PID: 42})
	tools := []string{"search", "exec", "browse"}
	prios := []string{"P0", "P1", "P2"}
	for s := range seconds {
		if s == stepAt {
			one := 1
			emit(api.Event{Event: api.EventStepDown, Reason: api.ReasonWatermark, From: "fp16", To: "int8", ToLevel: &one})
			profile, level = "int8", 1
		}
		for i := range perSecond {
			emit(api.Event{Event: api.EventAdmission, Decision: "gpu", Bytes: 1 << 20,
				Priority: prios[i%3], Tool: tools[i%3], Lease: "0123456789abcdef"})
			if i%500 == 499 {
				j.Flush() // a tight loop would outrun the writer; a socket does not
			}
		}
		time.Sleep(time.Second)
	}
	emit(api.Event{Event: api.EventExit, PID: 42})
	end := time.Now()
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if d := j.Dropped(); d != 0 {
		t.Fatalf("%d events dropped", d)
	}
	evs, skipped, err := Read(path, time.Time{})
	if err != nil || skipped != 0 {
		t.Fatalf("Read: %d skipped, %v", skipped, err)
	}
	return evs, end
}

// TestFloodOfGrantedAdmissions is the case: 250,000 granted
// reservations. At 50 a second (83 minutes) through a journal small enough
// to rotate dozens of times, the run's start and its step-down rotate
// away, and the report still has them: one step-down, every supervised
// second in the right profile, every admission.
func TestFloodOfGrantedAdmissions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const seconds, perSecond, stepAt = 5000, 50, 1000
		evs, end := flood(t, Options{Limits: Limits{MaxBytes: 16 << 10, MaxFiles: 2}}, seconds, perSecond, stepAt)
		if slices.ContainsFunc(evs, func(ev api.Event) bool {
			return ev.Event == api.EventStart || ev.Event == api.EventStepDown
		}) {
			t.Fatal("the start or the step-down survived: the journal did not rotate them away")
		}
		s := report.Summarize(evs, end, false)
		if s.Stepdowns != 1 || s.StepdownsByReason[api.ReasonWatermark] != 1 {
			t.Errorf("stepdowns %d %v, want 1 watermark", s.Stepdowns, s.StepdownsByReason)
		}
		if want := map[string]float64{"fp16": stepAt, "int8": seconds - stepAt}; !maps.Equal(s.SecondsInProfile, want) {
			t.Errorf("seconds_in_profile %v, want %v", s.SecondsInProfile, want)
		}
		if s.SupervisedSeconds != seconds || s.FirstProfile != "fp16" || s.FallbackRate != 0.8 {
			t.Errorf("supervised %v s, first %q, fallback rate %v; want %d, fp16, 0.8",
				s.SupervisedSeconds, s.FirstProfile, s.FallbackRate, seconds)
		}
		if s.Admissions["gpu"] != seconds*perSecond {
			t.Errorf("admissions %v, want %d granted", s.Admissions, seconds*perSecond)
		}
		// --since within the surviving lines is exact. A summary counts at
		// its time, the end of its second: the window [4900 s, 5000 s]
		// has the grants of 4899 .. 4999.
		w := report.SummarizeSince(evs, end.Add(-100*time.Second), end, false)
		if w.Stepdowns != 0 || !maps.Equal(w.SecondsInProfile, map[string]float64{"int8": 100}) || w.Admissions["gpu"] != 101*perSecond {
			t.Errorf("last 100 s: stepdowns %d, seconds %v, admissions %v", w.Stepdowns, w.SecondsInProfile, w.Admissions)
		}
		// --since before the oldest surviving line, inside the run: the
		// window starts at the oldest record, and says so.
		oldest := evs[0]
		if oldest.Event != api.EventTotals {
			t.Fatalf("the oldest line is %q, not a totals record", oldest.Event)
		}
		w = report.SummarizeSince(evs, end.Add(-1000*time.Second), end, false)
		if kept := end.Sub(oldest.Time).Seconds(); !w.Since.Equal(oldest.Time) || w.SecondsInProfile["int8"] != kept {
			t.Errorf("last 1000 s: since %v, int8 %v s; want the oldest record's %v, %v s", w.Since, w.SecondsInProfile["int8"], oldest.Time, kept)
		}
	})
}

// TestFloodInSeconds: 250,000 grants in 17 s, as the issue measured, now
// take 17 lines, and the default journal keeps the whole run in one file.
func TestFloodInSeconds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		evs, end := flood(t, Options{}, 17, 250000/17+1, 5)
		admissions := 0
		for _, ev := range evs {
			if ev.Event == api.EventAdmission {
				admissions++
			}
		}
		if admissions != 17 {
			t.Errorf("%d admission lines, want one a second", admissions)
		}
		s := report.Summarize(evs, end, false)
		if s.Stepdowns != 1 || s.SupervisedSeconds != 17 || s.Admissions["gpu"] != 17*(250000/17+1) {
			t.Errorf("stepdowns %d, supervised %v, admissions %v", s.Stepdowns, s.SupervisedSeconds, s.Admissions)
		}
	})
}
