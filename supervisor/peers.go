package supervisor

import (
	"context"
	"fmt"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/policy"
	"github.com/gpuguard/gpuguard/supervisor/core"
	"github.com/gpuguard/gpuguard/supervisor/sense"
)

// Peers is how the supervisor deals with the other tenants of its GPUs
// (package sharing implements it over a coordinator): the agreement on who
// steps, the one start at a time, and what the others are told of this
// instance. Its words are api's and the decision core's: what the tenants
// ask of this instance comes back as core inputs, and the core says when
// to propose and to claim (core.Propose, core.ClaimStart). A nil Peers
// decides alone.
type Peers interface {
	Agreement
	StartOrder
	Tenancy
	Rooms
}

// Agreement is the tenants' agreement on who steps for a shared GPU's
// pressure. Propose and Outcome's announcements go off the loop; the
// coordinator's answer to a proposal comes back on Outcomes.
type Agreement interface {
	// Proposing: a proposal is with the coordinator; Held: a decision's
	// grace holds the GPU at now.
	Proposing() bool
	Held(now time.Time) bool
	// Propose takes a step for reason on GPU gpu to the coordinator (self
	// is asked only when a proposal goes out).
	Propose(ctx context.Context, now time.Time, reason core.Reason, gpu string, ratio float64, self func() api.TenantInfo)
	Outcomes() <-chan api.Outcome
	// Outcome, Step and Note judge the coordinator's outcome, another
	// tenant's decision for this instance and one it noted, by what the
	// instance is at t; Announce then tells the others of the decisions
	// executed here.
	Outcome(o api.Outcome, t core.Tenant) []core.Input
	Step(st api.TenantStep, t core.Tenant) (api.TenantDecision, []core.Input, error)
	Note(d api.TenantDecision, t core.Tenant) []core.Input
	Announce()
}

// StartOrder is the one start at a time on a shared GPU: the claim, made
// off the loop (its answer comes on Starts), and the flag the other
// tenants read while it lasts.
type StartOrder interface {
	ClaimStart(ctx context.Context, gpus []string, settle time.Duration)
	Starts() <-chan api.StartOutcome
	EndStart()
	Starting() bool
}

// Tenancy is what the other tenants know of this instance: what it is
// (Publish, after every event) and its admission leases, read through
// leases when they are published (at once, or a little after a release).
// Admit holds the GPUs' admission locks for one reservation.
type Tenancy interface {
	Publish(info api.TenantInfo, leases func() uint64)
	Admit(ctx context.Context, gpus []string) (*api.Admission, error)
	PublishLeases(leases func() uint64) error
	PublishLeasesSoon(leases func() uint64, done <-chan struct{})
	FlushLeases(leases func() uint64)
}

// Rooms is making room on a shared GPU: the ask that idle tenants sleep
// for this instance, made off the loop (its answer comes on
// RoomAnswers). The core says when (core.AskRoom) and what an answer
// leads to (core.RoomAnswer).
type Rooms interface {
	MakeRoom(ctx context.Context, ask api.RoomAsk)
	RoomAnswers() <-chan api.RoomOutcome
}

// self is this instance as the other tenants of its GPUs see it: what
// they are told of it (its tenant record: info), what it is when an input
// of the agreement is judged (tenant), and its facts as a candidate to
// sleep for one of them (room.go). It reads the parts of the loop it is
// given once, and the policy in force, given with each call (a reload
// replaces it).
type self struct {
	name     string
	pid      int // gpuguard's own
	observe  bool
	peers    bool // it has peers (the loop's Peers is not nil)
	canSleep bool // a front door can put it to sleep for a peer, and wake it
	started  time.Time
	life     *lifecycle   // the loop's
	latest   *latest      // the loop's
	act      *activity    // the supervisor's
	pace     *sense.Pacer // the loop's: the forecast
}

// sharing says how this instance takes part in the decisions of shared
// GPUs. notes: it journals the other tenants' decisions as yields (it has
// peers and watches the device's memory: a process-scope instance steps
// by its own quota, so a step elsewhere does not answer its pressure);
// coordinated: it also decides with them (it enforces: not observe mode).
func (me *self) sharing(pol *policy.Policy) (coordinated, notes bool) {
	notes = me.peers && pol.Watch.Scope == policy.ScopeDevice
	return notes && !me.observe, notes
}

// onTenant handles another tenant's decision for this instance (a step it
// executes, or one it notes).
func (l *loop) onTenant(r request) {
	switch {
	case l.peers == nil && r.op == opTenantStep:
		r.reply <- response{err: fmt.Errorf("%s takes no part in shared decisions (observe mode or scope = \"process\")", l.cfg.Name)}
	case l.peers == nil:
		r.reply <- response{}
	case r.op == opTenantStep:
		d, ins, err := l.peers.Step(r.tenantStep, l.self.tenant(time.Now(), l.pol))
		for _, in := range ins {
			l.feed(in, nil)
		}
		r.reply <- response{tenantDecision: d, err: err}
	default:
		for _, in := range l.peers.Note(r.tenantDecision, l.self.tenant(time.Now(), l.pol)) {
			l.feed(in, nil)
		}
		r.reply <- response{}
	}
}

// tenant is what this instance is at now, as the agreement judges an
// input by it: the one place the agreement's inputs read the loop.
func (me *self) tenant(now time.Time, pol *policy.Policy) core.Tenant {
	names := make([]string, len(pol.Profiles))
	for i, p := range pol.Profiles {
		names[i] = p.Name
	}
	coordinated, notes := me.sharing(pol)
	c := me.life
	return core.Tenant{Now: now, Name: me.name, Coordinated: coordinated, Notes: notes,
		Ratio: me.latest.ratio, ETA: me.pace.Forecast().ETA.Seconds(), GPUs: watchedUUIDs(me.latest.lastSample.Devices),
		Steady: c.steady(), State: c.state, Level: c.level, Profiles: names,
		Grace: pol.Watermark.Grace, Sustain: pol.Watermark.Sustain,
		Writable: func() error { return c.file.writable(pol.Profiles[c.level], c.level) }}
}

// info is what the other tenants are told of this instance (the `tenant`
// request answers it), without the parts read live (starting, the
// leases): its ranking facts and, on each watched GPU, what its child
// uses there when the backend lists processes. was is the record told
// before (nil: none): its GPUs and room are handed back as they are
// where nothing in them changed, so that a calm sample allocates none.
func (me *self) info(pol *policy.Policy, was *api.TenantInfo) api.TenantInfo {
	c := me.life
	info := api.TenantInfo{Name: me.name, PID: me.pid, Priority: pol.Priority,
		Scope: pol.Watch.Scope, Observe: me.observe, State: c.state, Level: c.level,
		Levels: len(pol.Profiles), GPUs: []api.TenantGPU{},
		GraceSeconds: pol.Watermark.Grace.Seconds(), SettleSeconds: pol.Watch.Settle.Seconds()}
	if r, ok := me.room(pol); ok {
		if was != nil && sameValue(was.Room, &r) {
			info.Room = was.Room
		} else {
			fresh := r
			info.Room = &fresh
		}
	}
	if !me.latest.haveSample {
		return info
	}
	told := info.GPUs
	if was != nil && was.GPUs != nil {
		told = was.GPUs
	}
	s := me.latest.lastSample
	own := !s.ProcessesAt.IsZero() && c.run.child != nil
	kept := 0                // how many of s's GPUs, from the first, told has as they are
	var made []api.TenantGPU // nil while they all are
	for i, d := range s.Devices {
		g := api.TenantGPU{UUID: d.UUID}
		if own {
			for _, p := range s.Processes {
				if p.Device == d.Index && c.run.childTree[p.PID] {
					g.UsedBytes += p.Used
				}
			}
		}
		if made == nil && i < len(told) && told[i] == g {
			kept++
			continue
		}
		if made == nil {
			made = append(make([]api.TenantGPU, 0, len(s.Devices)), told[:kept]...)
		}
		made = append(made, g)
	}
	info.GPUs = made
	if made == nil {
		info.GPUs = told[:kept:kept]
	}
	return info
}
