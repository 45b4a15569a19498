package report

import (
	"cmp"
	"slices"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// FallbackWarnRate is the fallback rate above which the report says the GPU
// budget should grow: more than this share of the time below the first
// profile means the first profile does not really fit.
const FallbackWarnRate = 0.05

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

	// SecondsInProfile is supervised (child running) time by profile, up
	// to Until.
	SecondsInProfile  map[string]float64 `json:"seconds_in_profile"`
	SupervisedSeconds float64            `json:"supervised_seconds"`
	// FirstProfile is the profile of the first start in the journal: the
	// baseline of FallbackRate.
	FirstProfile string `json:"first_profile"`
	// FallbackRate is the share of supervised time spent in a profile
	// below FirstProfile (0..1).
	FallbackRate   float64   `json:"fallback_rate"`
	TopOOMMessages []Message `json:"top_oom_messages"`
	// SkippedLines is how many journal lines could not be read (torn or
	// malformed); the caller fills it in.
	SkippedLines int `json:"skipped_lines"`

	// levels orders profiles for the text output.
	levels map[string]int
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
	if len(events) > 0 && events[0].Time.After(since) {
		s.Since = events[0].Time
	}
	s.Until = until

	var (
		cur      run
		below    float64
		oomMsgs  messages
		prevTime time.Time
	)
	for i, ev := range events {
		if i > 0 {
			gap := ev.Event == api.EventStart && cur.running // its exit was never logged
			if !gap {
				below += s.account(cur, prevTime, ev.Time, until)
			}
		}
		if !ev.Time.Before(since) {
			s.count(ev, &cur, &oomMsgs)
		}
		if ev.Name != "" {
			s.Name = ev.Name
		}
		cur.apply(ev, &s)
		prevTime = ev.Time
	}
	if len(events) > 0 {
		below += s.account(cur, prevTime, until, until)
	}
	if s.SupervisedSeconds > 0 {
		s.FallbackRate = below / s.SupervisedSeconds
	}
	s.TopOOMMessages = oomMsgs.top(5)
	return s
}

// run is what the journal says was happening between two events.
type run struct {
	running    bool
	profile    string
	level      int
	baseLevel  int
	haveBase   bool
	pendingOOM bool // an oom event whose restart has not come yet
}

// apply moves the state past ev.
func (r *run) apply(ev api.Event, s *Summary) {
	switch ev.Event {
	case api.EventStart:
		r.running, r.profile, r.level = true, ev.Profile, ev.Level
		if !r.haveBase {
			r.haveBase, r.baseLevel, s.FirstProfile = true, ev.Level, ev.Profile
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
		if _, ok := s.levels[r.profile]; !ok {
			s.levels[r.profile] = r.level
		}
	}
}

// account adds the supervised time in [from, to), clipped to the window,
// and returns the part of it spent below the baseline.
func (s *Summary) account(r run, from, to, until time.Time) float64 {
	if !r.running || r.profile == "" {
		return 0
	}
	from = maxTime(from, s.Since)
	to = minTime(to, until)
	if !to.After(from) {
		return 0
	}
	d := to.Sub(from).Seconds()
	s.SecondsInProfile[r.profile] += d
	s.SupervisedSeconds += d
	if r.haveBase && r.level > r.baseLevel {
		return d
	}
	return 0
}

// count tallies one event inside the window.
func (s *Summary) count(ev api.Event, r *run, oom *messages) {
	s.Events++
	switch ev.Event {
	case api.EventStepDown:
		s.Stepdowns++
		s.StepdownsByReason[cmp.Or(ev.Reason, "unknown")]++
	case api.EventStepUp:
		s.Stepups++
	case api.EventObserve:
		s.ObservedStepdowns++
	case api.EventCritical:
		s.CriticalAtLast++
	case api.EventOOM:
		s.OOMs++
		oom.add(oomMessage(ev))
		r.pendingOOM = true
	case api.EventRestart:
		s.Restarts[cmp.Or(ev.Reason, "unknown")]++
		if ev.Reason != api.ReasonOOM {
			break
		}
		if movedDown(ev) {
			s.OOMFallbacks++
		}
		// The oom event before it already carried the evidence.
		if !r.pendingOOM {
			oom.add(oomMessage(ev))
		}
		r.pendingOOM = false
	case api.EventGiveUp:
		s.GiveUps++
	case api.EventProbeError:
		s.ProbeErrors++
	case api.EventAdmission:
		s.Admissions[cmp.Or(ev.Decision, "unknown")]++
	case api.EventYield:
		s.Yields++
		s.YieldsTo[cmp.Or(ev.To, "unknown")]++
	}
}

// movedDown says whether a restart landed in a lower profile than it left.
func movedDown(ev api.Event) bool {
	if ev.FromLevel != nil && ev.ToLevel != nil {
		return *ev.ToLevel > *ev.FromLevel
	}
	return ev.From != "" && ev.To != "" && ev.From != ev.To
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

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
