package report

import (
	"cmp"
	"maps"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// Tally is the running account of one gpuguard run: every figure a Summary
// reports, cumulative from the run's start. The journal keeps one as it
// writes and puts it on disk as totals records; the report resumes from the
// newest record it has, so a run's figures survive its first lines rotating
// away. It is not safe for concurrent use.
type Tally struct {
	t  api.Totals
	r  run
	at time.Time // supervised time is accounted up to here
}

// run is what the journal says is happening between two events.
type run struct {
	running   bool
	profile   string
	level     int
	haveFirst bool
}

// NewTally starts the account of a run that opened the journal at runStart.
func NewTally(runStart time.Time) *Tally {
	return &Tally{t: emptyTotals(runStart), at: runStart}
}

func emptyTotals(runStart time.Time) api.Totals {
	return api.Totals{
		RunStart:         runStart,
		SecondsInProfile: map[string]float64{},
		ProfileLevels:    map[string]int{},
		Events:           map[string]int{},
		Stepdowns:        map[string]int{},
		Restarts:         map[string]int{},
		Admissions:       map[string]int{},
		Yields:           map[string]int{},
	}
}

// resume continues the account from a totals record.
func resume(rec api.Event) *Tally {
	t := &Tally{t: copyTotals(*rec.Totals), at: rec.Time}
	t.r = run{running: rec.Totals.Running, profile: rec.Profile, level: rec.Level,
		haveFirst: rec.Totals.FirstProfile != ""}
	return t
}

// Add accounts the time up to ev in the state before it, then counts ev
// and moves the state past it. Totals and watermark records are
// bookkeeping, not events: they are ignored (the review page reads the
// watermark records itself).
func (t *Tally) Add(ev api.Event) {
	if ev.Event == api.EventTotals || ev.Event == api.EventWatermark {
		return
	}
	if ev.Event == api.EventStart && t.r.running {
		// The previous child's exit was never logged (gpuguard died
		// unrecorded, or the line was lost): the gap is unknown, so it is
		// not counted.
		t.at = later(t.at, ev.Time)
	} else {
		t.advance(ev.Time)
	}
	t.count(ev)
	t.apply(ev)
}

// Record accounts the time up to now and returns the totals record. Its
// time is never before the last event added.
func (t *Tally) Record(now time.Time) api.Event {
	t.advance(now)
	return api.Event{Time: t.at, Event: api.EventTotals, Profile: t.r.profile, Level: t.r.level,
		Totals: t.snapshot()}
}

// advance accounts the supervised time up to to.
func (t *Tally) advance(to time.Time) {
	if !to.After(t.at) {
		return
	}
	if t.r.running && t.r.profile != "" && !t.at.IsZero() {
		t.t.SecondsInProfile[t.r.profile] += to.Sub(t.at).Seconds()
	}
	t.at = to
}

// snapshot is a deep copy of the totals with the current state.
func (t *Tally) snapshot() *api.Totals {
	c := copyTotals(t.t)
	c.Running = t.r.running
	return &c
}

// count tallies one event. An admission summary counts as its Count.
func (t *Tally) count(ev api.Event) {
	n := 1
	if ev.Event == api.EventAdmission && ev.Count > 0 {
		n = ev.Count
	}
	t.t.Events[ev.Event] += n
	switch ev.Event {
	case api.EventStepDown:
		t.t.Stepdowns[cmp.Or(ev.Reason, "unknown")]++
	case api.EventRestart:
		t.t.Restarts[cmp.Or(ev.Reason, "unknown")]++
		if ev.Reason == api.ReasonOOM && movedDown(ev) {
			t.t.OOMFallbacks++
		}
	case api.EventAdmission:
		t.t.Admissions[cmp.Or(ev.Decision, "unknown")] += n
	case api.EventYield:
		t.t.Yields[cmp.Or(ev.To, "unknown")]++
	}
}

// apply moves the state past ev.
func (t *Tally) apply(ev api.Event) {
	r := &t.r
	switch ev.Event {
	case api.EventStart:
		r.running, r.profile, r.level = true, ev.Profile, ev.Level
		if !r.haveFirst {
			r.haveFirst, t.t.FirstProfile, t.t.FirstLevel = true, ev.Profile, ev.Level
		}
	case api.EventStepDown, api.EventStepUp, api.EventRestart:
		// The event is logged in the old profile; To names the new one.
		if ev.To != "" {
			r.profile = ev.To
		}
		if ev.ToLevel != nil {
			r.level = *ev.ToLevel
		}
	case api.EventExit:
		r.running = false
	}
	if r.profile != "" {
		if _, ok := t.t.ProfileLevels[r.profile]; !ok {
			t.t.ProfileLevels[r.profile] = r.level
		}
	}
}

// movedDown says whether a restart landed in a lower profile than it left.
func movedDown(ev api.Event) bool {
	if ev.FromLevel != nil && ev.ToLevel != nil {
		return *ev.ToLevel > *ev.FromLevel
	}
	return ev.From != "" && ev.To != "" && ev.From != ev.To
}

func copyTotals(t api.Totals) api.Totals {
	c := t
	c.SecondsInProfile = cloneOr(t.SecondsInProfile)
	c.ProfileLevels = cloneOr(t.ProfileLevels)
	c.Events = cloneOr(t.Events)
	c.Stepdowns = cloneOr(t.Stepdowns)
	c.Restarts = cloneOr(t.Restarts)
	c.Admissions = cloneOr(t.Admissions)
	c.Yields = cloneOr(t.Yields)
	return c
}

// cloneOr copies m; a nil m (a record written with an empty map left out,
// or by hand) becomes an empty map.
func cloneOr[V any](m map[string]V) map[string]V {
	c := maps.Clone(m)
	if c == nil {
		c = map[string]V{}
	}
	return c
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
