package core

import (
	"fmt"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/policy"
)

// The measured effect of a live change through server actions. A 2xx is
// not trusted blindly: SGLang started without --enable-memory-saver
// answers its release with 200 and frees nothing, and Ollama frees its
// memory only after its 200. So once the actions of a change down the
// ladder are done, the first sample `grace` later says what the change
// relieved (journaled as a relieved event), and when the watermark is
// still above high the next step follows at once, live or not, down to
// stopping the server (or to the critical alarm at the last profile).
//
// Without this, an instance asleep with its child running would wait for
// the rules alone, and on a shared GPU the tenants never choose a
// sleeping instance to step: the server would hold its memory for ever.

// Measured is a good sample while a live change's effect is being
// measured (State.Measuring): the watermark Ratio, and Used, the memory
// read as ActionsDone's Before was. Shared: the instance decides with the
// tenants of its GPU (coordinated).
type Measured struct {
	Now    time.Time
	Ratio  float64
	Used   uint64
	Shared bool
}

func (Measured) input() {}

// measuring is a live change whose effect is to be measured.
type measuring struct {
	at    time.Time // its actions ended
	steps int       // the rules' step count then: a step since ends the measurement unmade
	// from and to are the levels left and entered; before what the child
	// held before the change (known: there was a reading).
	from, to int
	before   uint64
	known    bool
}

// Measuring reports whether a live change's effect waits to be measured:
// every steady sample is then a Measured.
func (st State) Measuring() bool { return st.measure != nil }

// measured judges a live change's effect at the first sample `grace`
// after its actions ended: the relieved event always; the next step when
// the watermark is still above high. A coordinated instance in a serving
// profile leaves that step to the tenants' agreement, as any step of a
// running instance; one that serves nothing takes it itself (the tenants
// never choose a sleeping instance). Another step, a new child or a
// reload since the change ends the measurement unmade.
func (st State) measured(g Given, in Measured) (State, []Effect) {
	m := st.measure
	if m == nil {
		return st, nil
	}
	pol, wm := g.Policy, g.Policy.Watermark
	if m.steps != st.rules.steps || g.Level != m.to || m.to >= len(pol.Profiles) {
		st.measure = nil
		return st, nil
	}
	if in.Now.Sub(m.at) < wm.Grace {
		return st, nil
	}
	st.measure = nil
	to := pol.Profiles[m.to].Name
	ev := api.Event{Event: api.EventRelieved, From: pol.Profiles[m.from].Name, To: to,
		FromLevel: new(m.from), ToLevel: new(m.to), Watermark: in.Ratio}
	relieved := "an unknown amount"
	if m.known {
		r := m.before - min(m.before, in.Used)
		ev.RelievedBytes = &r
		relieved = policy.FormatSize(r)
	}
	ev.Detail = fmt.Sprintf("the live change to %s relieved %s within grace %s; watermark %.2f", to, relieved, wm.Grace, in.Ratio)
	effs := []Effect{Journal{ev}}
	if in.Ratio <= wm.High {
		return st, effs
	}
	why := fmt.Sprintf("watermark %.2f > %.2f %s after the live change to %s, which relieved %s", in.Ratio, wm.High, wm.Grace, to, relieved)
	switch {
	case g.Observe:
		return st, append(effs, Log{"observe: would take the next step: " + why})
	case in.Shared && pol.Profiles[m.to].Serving():
		return st, effs
	}
	r := Watermark
	if in.Ratio >= wm.Critical {
		r = Critical
	}
	st, next := st.step(g, in.Now, in.Ratio, r, why)
	if len(next) > 0 && g.Level < len(pol.Profiles)-1 {
		effs = append(effs, Log{fmt.Sprintf("the live change to %s relieved %s and the watermark is still above high: the next step follows", to, relieved)})
	}
	return st, append(effs, next...)
}
