package supervisor

import (
	"context"
	"fmt"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/policy"
	"github.com/gpuguard/gpuguard/supervisor/core"
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

// sharing says how this instance takes part in the decisions of shared
// GPUs. notes: it journals the other tenants' decisions as yields (it has
// peers and watches the device's memory: a process-scope instance steps
// by its own quota, so a step elsewhere does not answer its pressure);
// coordinated: it also decides with them (it enforces: not observe mode).
func (l *loop) sharing() (coordinated, notes bool) {
	notes = l.peers != nil && l.pol.Watch.Scope == policy.ScopeDevice
	return notes && !l.cfg.Observe, notes
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
		d, ins, err := l.peers.Step(r.tenantStep, l.tenant(time.Now()))
		for _, in := range ins {
			l.feed(in, nil)
		}
		r.reply <- response{tenantDecision: d, err: err}
	default:
		for _, in := range l.peers.Note(r.tenantDecision, l.tenant(time.Now())) {
			l.feed(in, nil)
		}
		r.reply <- response{}
	}
}

// leasesChanged publishes the leases after the loop changed them
// (expiry, the child's exit), off the loop.
func (l *loop) leasesChanged() {
	if p := l.peers; p != nil {
		go p.PublishLeases(l.ledger.Outstanding)
	}
}

// tenant is what this instance is at now, as the agreement judges an
// input by it: the one place the agreement's inputs read the loop.
func (l *loop) tenant(now time.Time) core.Tenant {
	names := make([]string, len(l.pol.Profiles))
	for i, p := range l.pol.Profiles {
		names[i] = p.Name
	}
	coordinated, notes := l.sharing()
	return core.Tenant{Now: now, Name: l.cfg.Name, Coordinated: coordinated, Notes: notes,
		Ratio: l.latest.ratio, ETA: l.pace.Forecast().ETA.Seconds(), GPUs: watchedUUIDs(l.latest.lastSample.Devices),
		Steady: l.life.steady(), State: l.life.state, Level: l.life.level, Profiles: names,
		Grace: l.pol.Watermark.Grace, Sustain: l.pol.Watermark.Sustain,
		Writable: func() error { return l.life.file.writable(l.pol.Profiles[l.life.level], l.life.level) }}
}

// tenantInfo is what the other tenants are told of this instance (the
// `tenant` request answers it), without the parts read live (starting,
// the leases): its ranking facts and, on each watched GPU, what its child
// uses there when the backend lists processes.
func (l *loop) tenantInfo() api.TenantInfo {
	pol := l.pol
	info := api.TenantInfo{Name: l.cfg.Name, PID: l.s.snap.Load().status.PID, Priority: pol.Priority,
		Scope: pol.Watch.Scope, Observe: l.cfg.Observe, State: l.life.state, Level: l.life.level,
		Levels: len(pol.Profiles), GPUs: []api.TenantGPU{},
		GraceSeconds: pol.Watermark.Grace.Seconds(), SettleSeconds: pol.Watch.Settle.Seconds(), Room: l.roomInfo()}
	if !l.latest.haveSample {
		return info
	}
	s := l.latest.lastSample
	own := !s.ProcessesAt.IsZero() && l.life.run.child != nil
	for _, d := range s.Devices {
		g := api.TenantGPU{UUID: d.UUID}
		if own {
			for _, p := range s.Processes {
				if p.Device == d.Index && l.life.run.childTree[p.PID] {
					g.UsedBytes += p.Used
				}
			}
		}
		info.GPUs = append(info.GPUs, g)
	}
	return info
}
