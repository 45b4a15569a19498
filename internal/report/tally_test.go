package report

import (
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// withRecords writes evs as the journal does: a record at runStart first,
// then every event, with a record before each index in before (a
// rotation, or the periodic record) and one after the last (Close).
func withRecords(runStart time.Time, evs []api.Event, before ...int) []api.Event {
	tl := NewTally(runStart)
	lines := []api.Event{tl.Record(runStart)}
	for i, ev := range evs {
		if slices.Contains(before, i) {
			lines = append(lines, tl.Record(ev.Time))
		}
		lines = append(lines, ev)
		tl.Add(ev)
	}
	return append(lines, tl.Record(evs[len(evs)-1].Time))
}

func summary(s int, count int) api.Event {
	return api.Event{Time: at(s), Event: api.EventAdmission, Decision: "gpu", Count: count, Bytes: 10}
}

// aRun is a run with every kind of figure: a step-down, an OOM fallback,
// a crash restart and summarised admissions.
func aRun() []api.Event {
	return []api.Event{
		start(10, "fp16", 0, 0),
		summary(11, 500),
		step(100, api.EventStepDown, api.ReasonWatermark, "fp16", 0, "int8", 1),
		summary(101, 700),
		{Time: at(150), Event: api.EventAdmission, Decision: "deny"},
		exit(200, "int8", 1),
		oom(200, "int8", 1, "CUDA out of memory. Tried to allocate 2.00 GiB"),
		restart(200, api.ReasonOOM, "int8", 1, "int4", 2),
		start(202, "int4", 2, 1),
		summary(300, 3),
		exit(400, "int4", 2),
		restart(400, api.ReasonCrash, "int4", 2, "int4", 2),
		start(401, "int4", 2, 2),
	}
}

// figures is what must not change when lines rotate away.
func figures(s Summary) map[string]any {
	return map[string]any{
		"stepdowns": s.Stepdowns, "by_reason": maps.Clone(s.StepdownsByReason), "oom_fallbacks": s.OOMFallbacks,
		"restarts": maps.Clone(s.Restarts), "seconds": maps.Clone(s.SecondsInProfile), "supervised": s.SupervisedSeconds,
		"fallback": s.FallbackRate, "first": s.FirstProfile, "admissions": maps.Clone(s.Admissions),
		"ooms": s.OOMs, "events": s.Events, "since": s.Since, "until": s.Until,
	}
}

func sameFigures(t *testing.T, what string, got, want Summary) {
	t.Helper()
	g, w := figures(got), figures(want)
	for k := range w {
		if !equalAny(g[k], w[k]) {
			t.Errorf("%s: %s = %v, want %v", what, k, g[k], w[k])
		}
	}
}

func equalAny(a, b any) bool {
	switch a := a.(type) {
	case map[string]int:
		return maps.Equal(a, b.(map[string]int))
	case map[string]float64:
		return maps.Equal(a, b.(map[string]float64))
	case time.Time:
		return a.Equal(b.(time.Time))
	}
	return a == b
}

// TestRotatedRunStaysRight: whatever prefix of a run rotated away, as long
// as the oldest line left is a record (as the journal makes sure), the
// run's figures are those of the whole journal, live or not.
func TestRotatedRunStaysRight(t *testing.T) {
	lines := withRecords(at(0), aRun(), 2, 5, 9, 12)
	for _, live := range []bool{false, true} {
		whole := Summarize(lines, at(1000), live)
		if whole.Stepdowns != 1 || whole.OOMFallbacks != 1 || whole.Admissions["gpu"] != 1203 || whole.Admissions["deny"] != 1 {
			t.Fatalf("the whole journal: %+v", figures(whole))
		}
		if !whole.Since.Equal(at(0)) {
			t.Errorf("since %v, want the run's start", whole.Since)
		}
		for i, ev := range lines {
			if ev.Event != api.EventTotals {
				continue
			}
			sameFigures(t, "from line "+strconv.Itoa(i), Summarize(lines[i:], at(1000), live), whole)
		}
	}
}

func TestSinceWithRotatedLines(t *testing.T) {
	lines := withRecords(at(0), aRun(), 4, 9)
	cut := slices.IndexFunc(lines, func(ev api.Event) bool { return ev.Event == api.EventTotals && ev.Time.Equal(at(150)) })
	if cut < 0 {
		t.Fatal("no record at 150")
	}
	rotated := lines[cut:]

	// since inside what rotated away: the window starts at the oldest
	// record, and says so.
	s := SummarizeSince(rotated, at(120), at(1000), false)
	want := SummarizeSince(lines, at(150), at(1000), false)
	sameFigures(t, "since in the lost lines", s, want)
	if !s.Since.Equal(at(150)) {
		t.Errorf("since %v, want the record's time %v", s.Since, at(150))
	}

	// since after the oldest record: exact, by replay from it.
	sameFigures(t, "since after the record", SummarizeSince(rotated, at(250), at(1000), false),
		SummarizeSince(lines, at(250), at(1000), false))

	// since before the run began: the whole run, as if nothing rotated.
	s = SummarizeSince(withRecords(at(5), aRun(), 4, 9)[cut:], at(1), at(1000), true)
	if s.Stepdowns != 1 || s.SupervisedSeconds != 190+198+599 || !s.Since.Equal(at(5)) {
		t.Errorf("since before the run: stepdowns %d, supervised %v, since %v; want 1, 987, the run's start",
			s.Stepdowns, s.SupervisedSeconds, s.Since)
	}
}

// TestRunsAddUp: runs are told apart by their records' run_start; a run
// killed without a trace ends at its last line, and the next begins clean.
func TestRunsAddUp(t *testing.T) {
	run1 := withRecords(at(0), []api.Event{
		start(0, "fp16", 0, 0),
		step(100, api.EventStepDown, api.ReasonWatermark, "fp16", 0, "int8", 1),
		summary(200, 4), // then kill -9: the last record is Close's, at 200
	})
	run2 := withRecords(at(1000), []api.Event{
		start(1000, "fp16", 0, 0),
		exit(1100, "fp16", 0),
	})
	s := Summarize(append(slices.Clone(run1), run2...), at(5000), false)
	if want := map[string]float64{"fp16": 200, "int8": 100}; !maps.Equal(s.SecondsInProfile, want) {
		t.Errorf("seconds %v, want %v (no time between the runs)", s.SecondsInProfile, want)
	}
	if s.Stepdowns != 1 || s.Admissions["gpu"] != 4 || s.FirstProfile != "fp16" {
		t.Errorf("stepdowns %d, admissions %v, first %q", s.Stepdowns, s.Admissions, s.FirstProfile)
	}

	// A journal from before records, then a run with them.
	legacy := []api.Event{start(0, "fp16", 0, 0), exit(50, "fp16", 0)}
	s = Summarize(append(legacy, run2...), at(5000), false)
	if s.SupervisedSeconds != 150 || !s.Since.Equal(at(0)) {
		t.Errorf("legacy + records: supervised %v since %v, want 150 s since 0", s.SupervisedSeconds, s.Since)
	}
}

// TestRecordOutranksReplay: a line the writer counted but could not write
// (a full disk) is in the next record, and the report follows the record.
func TestRecordOutranksReplay(t *testing.T) {
	lines := withRecords(at(0), []api.Event{
		start(0, "fp16", 0, 0),
		step(100, api.EventStepDown, api.ReasonWatermark, "fp16", 0, "int8", 1),
		summary(150, 9),
		exit(200, "int8", 1),
	}, 3)
	lost := slices.DeleteFunc(slices.Clone(lines), func(ev api.Event) bool { return ev.Event == api.EventStepDown })
	s := Summarize(lost, at(1000), false)
	if s.Stepdowns != 1 || s.SecondsInProfile["int8"] != 100 {
		t.Errorf("stepdowns %d, int8 %v s; want 1 and 100 from the record", s.Stepdowns, s.SecondsInProfile["int8"])
	}
}

// TestSummaryLinesCount: an admission summary counts as its count, in the
// admissions and the events.
func TestSummaryLinesCount(t *testing.T) {
	s := Summarize([]api.Event{start(0, "fp16", 0, 0), summary(1, 250000),
		{Time: at(2), Event: api.EventAdmission, Decision: "gpu"}}, at(10), false)
	if s.Admissions["gpu"] != 250001 || s.Events != 250002 {
		t.Errorf("admissions %v, events %d; want 250001 and 250002", s.Admissions, s.Events)
	}
}
