package journal

import (
	"cmp"
	"strings"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/admission"
)

// Bounds on one summary line, so it stays small whatever clients send as
// tool names: at most maxTools distinct tools (the rest are counted under
// otherTool), each name cut to maxToolName bytes.
const (
	maxTools    = 64
	maxToolName = 128
	otherTool   = "(other)"
	noTool      = "(none)"
)

// granted says ev is one granted admission, which the journal summarises
// instead of writing.
func granted(ev api.Event) bool {
	return ev.Event == api.EventAdmission && ev.Decision == admission.DecisionGPU && ev.Count == 0
}

// batch gathers the granted admissions of one second into one summary line.
type batch struct {
	sec    time.Time // the start of the second; zero when empty
	latest time.Time // the newest admission's time
	ev     api.Event
}

func (b *batch) empty() bool { return b.sec.IsZero() }

// end is when the batch's second is over.
func (b *batch) end() time.Time { return b.sec.Add(time.Second) }

// add counts ev into the second starting at sec (ev's own second, or a
// later one for an admission that arrived after its second's line was
// written). The line takes the profile and name of the newest admission.
func (b *batch) add(sec time.Time, ev api.Event) {
	if b.empty() {
		b.sec = sec
		b.ev = api.Event{Event: api.EventAdmission, Decision: admission.DecisionGPU,
			ByPriority: map[string]int{}, ByTool: map[string]int{}}
	}
	b.latest = later(b.latest, ev.Time)
	s := &b.ev
	s.Name, s.Profile, s.Level = cmp.Or(ev.Name, s.Name), ev.Profile, ev.Level
	s.Count++
	s.Bytes += ev.Bytes
	// A request without a priority is treated as P1 (admission.Request).
	s.ByPriority[cmp.Or(ev.Priority, admission.P1)]++
	tool := cmp.Or(ev.Tool, noTool)
	if len(tool) > maxToolName {
		tool = strings.ToValidUTF8(tool[:maxToolName], "") // drop a cut rune
	}
	if _, ok := s.ByTool[tool]; !ok && len(s.ByTool) >= maxTools {
		tool = otherTool
	}
	s.ByTool[tool]++
}

// take returns the summary line and empties the batch. Its time is the end
// of the second, or now when the line goes out early (at Close), but never
// before the newest admission it counts.
func (b *batch) take(now time.Time) api.Event {
	ev := b.ev
	ev.Time = b.end()
	if now.Before(ev.Time) {
		ev.Time = later(now, b.latest)
	}
	*b = batch{}
	return ev
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
