package api

import "time"

// The types below are what the supervisor and a coordinator of the
// tenants of shared GPUs (package tenants) say to each other. They live
// here so that the supervisor owns its Coordinator interface without
// importing the package that implements it. None of them is on a wire:
// the socket's `tenant` messages and the runtime-dir files are
// TenantInfo, TenantStep and TenantDecision (tenant.go) and tenants' own.

// ClaimTTL is how long a claim waits for its confirmation. A younger
// unconfirmed claim is a decision in flight and holds the others; an older
// one is void (its decider or its executor died or hangs), and the tenant
// it named refuses to execute it.
const ClaimTTL = time.Second

// StartHoldFactor bounds how long a start claim can hold the others: a
// tenant that says it is starting for longer than this many settle periods
// is ignored.
const StartHoldFactor = 10

// IsDown reports whether kind gives memory back (down, predicted, critical).
func IsDown(kind string) bool {
	return kind == KindDown || kind == KindPredicted || kind == KindCritical
}

// Proposal is one tenant's verdict for one GPU: its watermark rules say
// the GPU needs a step of Kind. Self is the proposer's own TenantInfo.
type Proposal struct {
	GPU       string
	Kind      string
	Watermark float64
	Self      TenantInfo
}

// OutcomeKind is what a coordinator's Decide concluded.
type OutcomeKind int

const (
	// OutcomeHold: no step now. When Record.Seq > 0 the hold is the
	// cadence of a confirmed decision, to note; else a decision is in
	// flight.
	OutcomeHold OutcomeKind = iota
	// OutcomeStep: the proposer itself was chosen: it executes Claim (its
	// checks, then Confirm) and then Announces it.
	OutcomeStep
	// OutcomeYield: another tenant (Record.To) executed the decision.
	OutcomeYield
	// OutcomeNoCandidate: no tenant of the GPU can take such a step.
	OutcomeNoCandidate
	// OutcomeFailed: the log could not be used (Err); decide alone.
	OutcomeFailed
)

func (k OutcomeKind) String() string {
	return [...]string{"hold", "step", "yield", "no candidate", "failed"}[k]
}

// Outcome is Decide's answer.
type Outcome struct {
	Kind   OutcomeKind
	Claim  TenantStep
	Record TenantDecision
	// Peers are the sockets of the other tenants of the GPU that answered
	// (OutcomeStep: whom to Announce to).
	Peers []string
	// Shared: another tenant of the GPU answered.
	Shared bool
	Err    error
}

// StartOutcome is the answer to a claim of the start on shared GPUs.
type StartOutcome struct {
	// Granted: this instance holds the start claim of every GPU asked for
	// and may launch its child (choosing its profile on a fresh sample).
	Granted bool
	// Holder is the tenant that is starting, when not granted.
	Holder string
	GPU    string
	Err    error
}

// Admission is the right to decide one reservation on a set of GPUs: their
// admission locks, and the other tenants' outstanding leases on each
// (bytes by GPU UUID). Publish the new leases, then Release.
type Admission struct {
	Others map[string]uint64
	// Unlock lets go of the locks; the coordinator sets it. Call Release.
	Unlock func()
}

// Release unlocks the GPUs, once.
func (a *Admission) Release() {
	if a.Unlock != nil {
		a.Unlock()
		a.Unlock = nil
	}
}
