package report

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// DefaultBudget is the degraded rate above which the report says the GPU
// memory budget should grow (`report --budget`): more than this share of
// the time below the ladder's first profile means that profile does not
// really fit. It is the design's weekly review: "if the fallback rate is
// above 5 %, raise the memory budget".
const DefaultBudget = 0.05

// Summary is what `gpuguard report` prints; its JSON is `report --json`.
type Summary struct {
	Name  string    `json:"name,omitempty"`
	Live  bool      `json:"live"`
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
	// Events is how many journal events fell in the window.
	Events int `json:"events"`

	Stepdowns         int            `json:"stepdowns"`
	StepdownsByReason map[string]int `json:"stepdowns_by_reason"`
	Stepups           int            `json:"stepups"`
	// ObservedStepdowns counts what observe mode would have done.
	ObservedStepdowns int `json:"observed_stepdowns"`
	// CriticalAtLast counts samples above critical at the last profile.
	CriticalAtLast int `json:"critical_at_last"`
	OOMs           int `json:"ooms"`
	// OOMFallbacks counts OOM restarts that moved down a profile.
	OOMFallbacks int            `json:"oom_fallbacks"`
	Restarts     map[string]int `json:"restarts"`
	GiveUps      int            `json:"giveups"`
	ProbeErrors  int            `json:"probe_errors"`
	Admissions   map[string]int `json:"admissions"`
	// Yields counts the decisions on a shared GPU that another tenant
	// carried out instead of this one; YieldsTo counts them by tenant.
	Yields   int            `json:"yields"`
	YieldsTo map[string]int `json:"yields_to"`
	// Tasks counts deferred tasks (tasks.go).
	Tasks Tasks `json:"tasks"`

	// SecondsInProfile is supervised (child running) time by profile, up
	// to Until.
	SecondsInProfile  map[string]float64 `json:"seconds_in_profile"`
	SupervisedSeconds float64            `json:"supervised_seconds"`
	// FirstProfile is the profile of the first start in the journal: the
	// baseline of FallbackRate.
	FirstProfile string `json:"first_profile"`
	// FallbackRate is the share of supervised time spent in a profile
	// below FirstProfile (0..1).
	FallbackRate float64 `json:"fallback_rate"`
	// DegradedRate is the share of supervised time spent below the
	// ladder's first profile (level 0), whichever profile the instance
	// started in: an instance whose best profile never fits is degraded
	// all the time, though its fallback rate is 0.
	DegradedRate float64 `json:"degraded_rate"`
	// Budget is the degraded rate the instance is judged against
	// (`--budget`), and OverBudget says DegradedRate is above it.
	Budget         float64   `json:"budget"`
	OverBudget     bool      `json:"over_budget"`
	TopOOMMessages []Message `json:"top_oom_messages"`
	// SkippedLines is how many journal lines could not be read (torn or
	// malformed); the caller fills it in.
	SkippedLines int `json:"skipped_lines"`

	// levels orders profiles for the text output.
	levels map[string]int
	// counts is the window's events by name (Count).
	counts map[string]int
	// ladder names profiles by level as the newest fit events list them,
	// profiles that never ran too.
	ladder map[int]string
}

// Summarize summarises the whole of events (journal order, oldest first).
// For a live instance the last state runs on until now; otherwise the
// summary ends at the last event.
func Summarize(events []api.Event, now time.Time, live bool) Summary {
	return SummarizeSince(events, time.Time{}, now, live)
}

// SummarizeSince counts only what happened at or after since, but reads the
// events before it to know which profile was running when the window
// opened, so `--since 1h` on a quiet instance still shows an hour in its
// profile.
//
// The journal is a sequence of runs (one per gpuguard process; a run's
// totals records share a run_start). Each run's figures are the difference
// of its running account (Tally) at the window's end and at its start,
// resumed from the newest totals record before each point. Where a run's
// lines before since have rotated away and its oldest surviving line is a
// record after since, the account at since is unknown: that run's part of
// the window starts at the record instead, and Since says so. A run that
// began after since needs no lines before its start: its account there is
// zero.
func SummarizeSince(events []api.Event, since, now time.Time, live bool) Summary {
	s := Summary{
		Since:             since,
		StepdownsByReason: map[string]int{},
		Restarts:          map[string]int{api.ReasonOOM: 0, api.ReasonCrash: 0, api.ReasonWatermark: 0},
		Admissions:        map[string]int{},
		YieldsTo:          map[string]int{},
		SecondsInProfile:  map[string]float64{},
		TopOOMMessages:    []Message{},
		levels:            map[string]int{},
		Live:              live,
	}
	until := now
	if !live && len(events) > 0 {
		until = events[len(events)-1].Time
	}
	s.Until = until

	win := emptyTotals(time.Time{})
	var (
		begun bool
		base  = -1 // the level of the first start in the journal
	)
	runs := splitRuns(events)
	for i, evs := range runs {
		runUntil := evs[len(evs)-1].Time
		if i == len(runs)-1 {
			runUntil = until
		}
		w, ok := windowOf(evs, since, runUntil)
		if base < 0 && w.to.FirstProfile != "" {
			base, s.FirstProfile = w.to.FirstLevel, w.to.FirstProfile
		}
		for p, l := range w.to.ProfileLevels {
			if _, seen := s.levels[p]; !seen {
				s.levels[p] = l
			}
		}
		if !ok {
			continue
		}
		if !begun {
			begun, s.Since = true, w.begin
		}
		addDiff(&win, w.to, w.from)
	}
	s.fill(win, base)
	s.ladder = ladderNames(events)
	s.fillTasks(win, events, since)
	s.TopOOMMessages = oomMessages(events, since).top(5)
	for _, ev := range slices.Backward(events) {
		if ev.Name != "" {
			s.Name = ev.Name
			break
		}
	}
	return s
}

// splitRuns cuts the journal where a totals record names a new run. Lines
// from before totals records existed form one run with no record.
func splitRuns(events []api.Event) [][]api.Event {
	var (
		runs  [][]api.Event
		cur   []api.Event
		start time.Time
	)
	for _, ev := range events {
		if ev.Event == api.EventTotals && ev.Totals != nil && !ev.Totals.RunStart.Equal(start) {
			if len(cur) > 0 {
				runs = append(runs, cur)
			}
			cur, start = nil, ev.Totals.RunStart
		}
		cur = append(cur, ev)
	}
	if len(cur) > 0 {
		runs = append(runs, cur)
	}
	return runs
}

// window is one run's account at the start (from) and end (to) of its part
// of the window, which begins at begin.
type window struct {
	from, to api.Totals
	begin    time.Time
}

// windowOf replays one run's lines. ok is false when the run ended before
// since.
func windowOf(evs []api.Event, since, until time.Time) (w window, ok bool) {
	var (
		tl   *Tally
		have bool // from is known
		rest = evs
	)
	if first := evs[0]; first.Event == api.EventTotals && first.Totals != nil {
		tl, rest = resume(first), evs[1:]
		if first.Time.After(since) {
			have = true
			if first.Totals.RunStart.Before(since) {
				// The lines between since and this record are gone.
				w.from, w.begin = *tl.snapshot(), first.Time
			} else {
				w.from, w.begin = emptyTotals(time.Time{}), first.Totals.RunStart
			}
		}
	} else {
		tl = NewTally(time.Time{})
		if first.Time.After(since) {
			have, w.from, w.begin = true, emptyTotals(time.Time{}), first.Time
		}
	}
	mark := func() {
		tl.advance(since)
		have, w.from, w.begin = true, *tl.snapshot(), since
	}
	for _, ev := range rest {
		if !have && !ev.Time.Before(since) {
			mark()
		}
		if ev.Event == api.EventTotals && ev.Totals != nil {
			tl = resume(ev) // the record counts what this replay may have missed
			continue
		}
		tl.Add(ev)
	}
	if until.Before(since) {
		w.to = *tl.snapshot()
		return w, false
	}
	if !have {
		mark()
	}
	tl.advance(until)
	w.to = *tl.snapshot()
	return w, true
}

// addDiff adds to - from into sum.
func addDiff(sum *api.Totals, to, from api.Totals) {
	for k, v := range to.SecondsInProfile {
		if d := v - from.SecondsInProfile[k]; d > 0 {
			sum.SecondsInProfile[k] += d
		}
	}
	for _, m := range []struct{ sum, to, from map[string]int }{
		{sum.Events, to.Events, from.Events},
		{sum.Stepdowns, to.Stepdowns, from.Stepdowns},
		{sum.Restarts, to.Restarts, from.Restarts},
		{sum.Admissions, to.Admissions, from.Admissions},
		{sum.Yields, to.Yields, from.Yields},
	} {
		for k, v := range m.to {
			if d := v - m.from[k]; d > 0 {
				m.sum[k] += d
			}
		}
	}
	sum.OOMFallbacks += max(0, to.OOMFallbacks-from.OOMFallbacks)
}

// fill sets the summary's figures from the window's account; base is the
// level of the first start (-1: none).
func (s *Summary) fill(win api.Totals, base int) {
	var below, degraded float64
	for p, secs := range win.SecondsInProfile {
		if secs <= 0 {
			continue
		}
		s.SecondsInProfile[p] = secs
		s.SupervisedSeconds += secs
		l, ok := s.levels[p]
		if ok && base >= 0 && l > base {
			below += secs
		}
		if ok && l > 0 {
			degraded += secs
		}
	}
	if s.SupervisedSeconds > 0 {
		s.FallbackRate = below / s.SupervisedSeconds
		s.DegradedRate = degraded / s.SupervisedSeconds
	}
	s.SetBudget(DefaultBudget)
	s.counts = maps.Clone(win.Events)
	for _, n := range win.Events {
		s.Events += n
	}
	maps.Copy(s.StepdownsByReason, win.Stepdowns)
	s.Stepdowns = Sum(win.Stepdowns)
	maps.Copy(s.Restarts, win.Restarts)
	maps.Copy(s.Admissions, win.Admissions)
	maps.Copy(s.YieldsTo, win.Yields)
	s.Yields = win.Events[api.EventYield]
	s.OOMFallbacks = win.OOMFallbacks
	s.Stepups = win.Events[api.EventStepUp]
	s.ObservedStepdowns = win.Events[api.EventObserve]
	s.CriticalAtLast = win.Events[api.EventCritical]
	s.OOMs = win.Events[api.EventOOM]
	s.GiveUps = win.Events[api.EventGiveUp]
	s.ProbeErrors = win.Events[api.EventProbeError]
}

// oomMessages groups the OOM messages of the lines at or after since. A
// restart after OOM carries the evidence only when no oom event came first.
func oomMessages(events []api.Event, since time.Time) *messages {
	var (
		m       messages
		pending bool
	)
	for _, ev := range events {
		if ev.Time.Before(since) {
			continue
		}
		switch {
		case ev.Event == api.EventOOM:
			m.add(oomMessage(ev))
			pending = true
		case ev.Event == api.EventRestart && ev.Reason == api.ReasonOOM:
			if !pending {
				m.add(oomMessage(ev))
			}
			pending = false
		}
	}
	return &m
}

// profilesByLevel lists the profiles with time, best (lowest level) first.
func (s Summary) profilesByLevel() []string {
	var names []string
	for p := range s.SecondsInProfile {
		names = append(names, p)
	}
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(cmp.Compare(s.levels[a], s.levels[b]), cmp.Compare(a, b))
	})
	return names
}

// SetBudget judges the summary against budget, the degraded rate above
// which the memory budget should grow.
func (s *Summary) SetBudget(budget float64) {
	s.Budget, s.OverBudget = budget, s.DegradedRate > budget
}

// Level is the ladder level (0 = the first, best profile) of a profile the
// journal saw run; ok is false for one it never saw.
func (s Summary) Level(profile string) (level int, ok bool) {
	level, ok = s.levels[profile]
	return level, ok
}

// MostDegraded is the profile below the ladder's first in which the
// instance spent the most supervised time ("" when none): what it ran in
// instead of the profile it was meant to. Ties go to the better profile.
func (s Summary) MostDegraded() string {
	best, secs := "", 0.0
	for _, p := range s.profilesByLevel() {
		if l := s.levels[p]; l > 0 && s.SecondsInProfile[p] > secs {
			best, secs = p, s.SecondsInProfile[p]
		}
	}
	return best
}

// ladderNames reads the profiles' names by level from the fit events
// (each start lists the profiles it tried), the newest last, so a ladder
// renamed by a reload reads as it is now.
func ladderNames(events []api.Event) map[int]string {
	names := map[int]string{}
	for _, ev := range events {
		if ev.Event == api.EventFit {
			for _, tr := range ev.Tried {
				names[tr.Level] = tr.Profile
			}
		}
	}
	return names
}

// BestProfile names the ladder's first profile: as the newest fit event
// lists it, else as a child ran in it, else "level 0" (a journal from
// before fit events, of an instance that never ran its first profile).
func (s Summary) BestProfile() string {
	if p, ok := s.ladder[0]; ok {
		return p
	}
	for _, p := range slices.Sorted(maps.Keys(s.levels)) {
		if s.levels[p] == 0 {
			return p
		}
	}
	return "level 0"
}

// Count is how many events of that name fell in the window, by the same
// account as the other figures (an admission summary counts as its
// count), so it stays right when the window's first lines rotated away.
func (s Summary) Count(event string) int { return s.counts[event] }
