package core

import (
	"fmt"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/policy"
)

// The words the core and the agreement between the tenants of a shared
// GPU (package sharing) share. A coordinated instance's rules propose
// (Propose) instead of stepping; what the tenants then ask of it comes
// back as inputs: a step this instance was chosen for (Peer), the alarm
// when nobody can step (PeerNobody), another tenant's step (Yielded). The
// agreement judges those by Tenant, the instance's facts of the moment.

// Tenant is this instance as the agreement judges one of its inputs,
// read once when the input arrives.
type Tenant struct {
	Now  time.Time
	Name string
	// Coordinated: the instance takes part in the decisions of shared
	// GPUs; Notes: it journals the other tenants' decisions as yields.
	Coordinated, Notes bool
	Ratio              float64
	ETA                float64  // seconds to critical on the trend
	GPUs               []string // the watched GPUs' UUIDs, newest sample
	// Steady: a child runs and nothing else (a stop, a restart, an
	// action) is under way; State names the instance's state otherwise.
	Steady   bool
	State    string
	Level    int
	Profiles []string // the ladder's names
	Grace    time.Duration
	Sustain  time.Duration
	// Writable checks that the state file can be written: a step that
	// could not write it would not happen.
	Writable func() error
}

// Watches reports whether the instance watches GPU uuid.
func (t Tenant) Watches(uuid string) bool {
	for _, g := range t.GPUs {
		if g == uuid {
			return true
		}
	}
	return false
}

// Peer is the tenants' verdict that this instance steps: the tenants of
// a shared GPU chose it (Reason and Why say for what; no Why: the
// instance's own rules decided, and their detail says why).
type Peer struct {
	Now    time.Time
	Reason Reason
	Why    string
	Ratio  float64
	ETA    float64
}

// PeerNobody is the tenants' answer that nobody can step lower while the
// watermark is high: on shared GPU GPU, or (Shared false) on a GPU of
// this instance's own, where it cannot either.
type PeerNobody struct {
	Now    time.Time
	Ratio  float64
	GPU    string
	Shared bool
}

// Yielded is another tenant's step on a shared GPU this instance
// watches (Kind, on GPU, by To; Self: To is this instance, whose own
// step it already is). A step elsewhere is like a gap here: `sustain` of
// fresh readings again before the next proposal; and it is journaled as
// this instance's yield.
type Yielded struct {
	GPU, To, Kind string
	Self          bool
	Ratio         float64
}

// Propose takes the rules' verdict (a step for Reason) to the tenants of
// the watched GPUs; the worst of them is the one proposed for.
type Propose struct {
	Now    time.Time
	Reason Reason
	Ratio  float64
}

func (Peer) input()       {}
func (PeerNobody) input() {}
func (Yielded) input()    {}
func (Propose) effect()   {}

// propose is a coordinated instance's sample: the watermark rules judge
// the GPU, not the instance's own level (at the last profile, or the
// first for a step up, another tenant may be able to step, and whoever is
// chosen checks its own ladder), so they see a level with a profile on
// either side. Their verdict is proposed; nothing steps until the tenants
// choose (Peer).
func (st State) propose(wm policy.Watermark, in Sample, predicted bool) (State, []Effect) {
	if in.Proposing {
		return st, nil
	}
	v := st.rules.Observe(in.Now, in.Ratio, predicted, wm, 1, 3)
	if r := v.Reason(); r != "" {
		return st, []Effect{Propose{Now: in.Now, Reason: r, Ratio: in.Ratio}}
	}
	return st, nil
}

// peer is a step the tenants chose this instance for, told with the
// detail of the instance's own rules when they gave none.
func (st State) peer(g Given, in Peer) (State, []Effect) {
	why := in.Why
	if why == "" {
		why = in.Reason.Why(in.Ratio, g.Policy.Watermark, in.ETA)
	}
	return st.step(g, in.Now, in.Ratio, in.Reason, why)
}

// yielded restarts the sustain timer after another tenant's step and
// journals the yield.
func (st State) yielded(in Yielded) (State, []Effect) {
	st.rules.Gap()
	if in.Self {
		return st, nil
	}
	what := ReasonOfKind(in.Kind)
	return st, []Effect{
		Journal{api.Event{Event: api.EventYield, To: in.To, GPU: in.GPU, Reason: string(what), Watermark: in.Ratio,
			Detail: fmt.Sprintf("%s: %s by %s, which ranks first on the shared GPU", in.GPU, what.Text(), in.To)}},
		Log{fmt.Sprintf("yield: %s takes the %s on shared GPU %s", in.To, what.Text(), in.GPU)},
	}
}

// nobody is the rate-limited `critical` alarm when the watermark is at or
// above critical and no tenant can step lower.
func (st State) nobody(g Given, in PeerNobody) (State, []Effect) {
	wm := g.Policy.Watermark
	if !st.rules.FloorAlarm(in.Now, in.Ratio, wm) {
		return st, nil
	}
	detail := atLast(in.Ratio, wm)
	if in.Shared {
		detail = fmt.Sprintf("watermark %.2f >= critical %.2f and no tenant of shared GPU %s can step lower", in.Ratio, wm.Critical, in.GPU)
	}
	return st, []Effect{Journal{api.Event{Event: api.EventCritical, Watermark: in.Ratio, GPU: in.GPU, Detail: detail}}, Log{detail}}
}
