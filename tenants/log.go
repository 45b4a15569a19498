package tenants

import (
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// ClaimTTL is how long a claim waits for its confirmation. A younger
// unconfirmed claim is a decision in flight and holds the others; an older
// one is void (its decider or its executor died or hangs), and the tenant
// it named refuses to execute it.
const ClaimTTL = time.Second

// Keep is how many of the newest seqs a log keeps; older files are removed
// every Keep seqs, so between 8 and 16 are on disk.
const Keep = 8

// Claim is d.<seq>: tenant By decided, at At (unix ns, wall clock), that
// tenant To carries out a decision of Kind on GPU.
type Claim struct {
	Seq  int64  `json:"seq"`
	GPU  string `json:"gpu"`
	Kind string `json:"kind"`
	To   string `json:"to"`
	By   string `json:"by"`
	At   int64  `json:"at"`
}

// End is d.<seq>.ok, how a claim ended: confirmed by the tenant that
// executed it (At: when, GraceSeconds: its grace, the cadence of the GPU),
// or void (nobody executes it).
type End struct {
	Void         bool    `json:"void,omitempty"`
	By           string  `json:"by"`
	At           int64   `json:"at"`
	GraceSeconds float64 `json:"grace_seconds"`
}

// Entry is one seq of the log: a claim and, once it ended, its end. Claim
// is nil when only the end is left (a racing garbage collection).
type Entry struct {
	Seq   int64
	Claim *Claim
	End   *End
}

// Decision is the record other tenants note from a confirmed entry.
func (e Entry) Decision() api.TenantDecision {
	d := api.TenantDecision{Seq: e.Seq}
	if e.Claim != nil {
		d.GPU, d.Kind, d.To = e.Claim.GPU, e.Claim.Kind, e.Claim.To
	}
	if e.End != nil {
		d.At, d.GraceSeconds = e.End.At, e.End.GraceSeconds
		if d.To == "" {
			d.To = e.End.By
		}
	}
	return d
}

func (e Entry) confirmed() bool { return e.End != nil && !e.End.Void }

// State is what the log says before a new decision (see Evaluate).
type State struct {
	// Next is the seq a new claim takes.
	Next int64
	// Hold: no decision now. Record is set when the hold is the cadence
	// of a confirmed decision (to note); unset when a decision is in flight.
	Hold   bool
	Record *api.TenantDecision
	// Stale lists unconfirmed claims older than ClaimTTL, to void before
	// claiming the next seq.
	Stale []int64
}

// Evaluate applies the log's rules at now (entries in seq order):
//   - the newest confirmed decision holds every tenant of the GPU until its
//     At + grace (the cadence: no step until the stepping tenant's grace
//     has passed);
//   - an unconfirmed claim younger than ClaimTTL holds them too: a
//     decision is in flight;
//   - an older unconfirmed claim is stale: void it, then decide.
func Evaluate(entries []Entry, now time.Time) State {
	var st State
	var newest *Entry
	for i := range entries {
		e := &entries[i]
		st.Next = max(st.Next, e.Seq+1)
		switch {
		case e.confirmed():
			if newest == nil || e.Seq > newest.Seq {
				newest = e
			}
		case e.End != nil || e.Claim == nil: // void
		case now.Sub(time.Unix(0, e.Claim.At)) < ClaimTTL:
			st.Hold = true
		default:
			st.Stale = append(st.Stale, e.Seq)
		}
	}
	st.Next = max(st.Next, 1)
	if newest != nil {
		end := time.Unix(0, newest.End.At).Add(seconds(newest.End.GraceSeconds))
		if now.Before(end) {
			d := newest.Decision()
			st.Hold, st.Record = true, &d
		}
	}
	if st.Hold {
		st.Stale = nil
	}
	return st
}

// StartClaim is s.<seq>: tenant By claimed the GPU to start its child at
// At (unix ns). It blocks others while By says it is starting, for at most
// 10 x its settle.
type StartClaim struct {
	Seq           int64   `json:"seq"`
	By            string  `json:"by"`
	At            int64   `json:"at"`
	SettleSeconds float64 `json:"settle_seconds"`
}

// StartHoldFactor bounds how long a start claim can hold the others: a
// tenant that says it is starting for longer than this many settle periods
// is ignored.
const StartHoldFactor = 10

// Blocking returns the newest start claim when it may still block self at
// now (held by another tenant, younger than StartHoldFactor x its settle):
// its holder must then be asked whether it is still starting. It also
// returns the seq a new claim takes.
func Blocking(claims []StartClaim, self string, now time.Time) (*StartClaim, int64) {
	var newest *StartClaim
	next := int64(1)
	for i := range claims {
		c := &claims[i]
		next = max(next, c.Seq+1)
		if newest == nil || c.Seq > newest.Seq {
			newest = c
		}
	}
	if newest == nil || newest.By == self {
		return nil, next
	}
	until := time.Unix(0, newest.At).Add(StartHoldFactor * seconds(newest.SettleSeconds))
	if !now.Before(until) {
		return nil, next
	}
	return newest, next
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
