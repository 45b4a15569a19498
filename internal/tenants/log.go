package tenants

import (
	"math"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/paths"
	"github.com/gpuguard/gpuguard/policy"
)

// ClaimTTL is how long a claim waits for its confirmation (api.ClaimTTL:
// the supervisor refuses to execute an older one).
const ClaimTTL = api.ClaimTTL

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
		d.At, d.GraceSeconds = e.End.At, clampSeconds(e.End.GraceSeconds, 0, policy.MaxDuration)
		if d.To == "" {
			d.To = e.End.By
		}
	}
	return d
}

func (e Entry) confirmed() bool { return e.End != nil && !e.End.Void }

// clockSkew is how far in the future a record's time may lie and still be
// believed: the tenants share one host's clock, so a claim dated later than
// this was not written by a tenant, and would otherwise hold for ever.
const clockSkew = ClaimTTL

// future reports whether at (unix ns) lies beyond now + clockSkew.
func future(at int64, now time.Time) bool { return time.Unix(0, at).After(now.Add(clockSkew)) }

// clampSeconds holds a peer's duration (seconds, as it wrote them) to the
// range policy validation allows, so that no file can make a bound longer
// than a policy could (NaN, which JSON cannot carry, counts as lo).
func clampSeconds(s float64, lo, hi time.Duration) float64 {
	if math.IsNaN(s) {
		return lo.Seconds()
	}
	return min(max(s, lo.Seconds()), hi.Seconds())
}

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
//
// A record dated in the future (beyond clockSkew) is void, and a grace is
// held to policy's bounds: a forged file holds the GPU no longer than a
// policy could.
func Evaluate(entries []Entry, now time.Time) State {
	var st State
	var newest *Entry
	for i := range entries {
		e := &entries[i]
		st.Next = max(st.Next, e.Seq+1)
		switch {
		case e.End != nil && future(e.End.At, now): // void
		case e.End == nil && e.Claim != nil && future(e.Claim.At, now):
			st.Stale = append(st.Stale, e.Seq)
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
		end := time.Unix(0, newest.End.At).Add(seconds(clampSeconds(newest.End.GraceSeconds, 0, policy.MaxDuration)))
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
	// Void marks a claim whose file could not be read or parsed: it takes
	// its seq and blocks nobody.
	Void bool `json:"-"`
}

// valid reports whether c is a claim a tenant could have made: a valid
// name, dated no later than now (within clockSkew).
func (c *StartClaim) valid(now time.Time) bool {
	return !c.Void && paths.ValidName(c.By) == nil && c.At > 0 && !future(c.At, now)
}

// StartHoldFactor bounds how long a start claim can hold the others
// (api.StartHoldFactor, which the supervisor's start also keeps to).
const StartHoldFactor = api.StartHoldFactor

// Blocking returns the newest valid start claim when it may still block
// self at now (held by another tenant, younger than StartHoldFactor x its
// settle, that settle held to policy's range): its holder must then be
// asked whether it is still starting. It also returns the seq a new claim
// takes, above every claim, void ones included.
func Blocking(claims []StartClaim, self string, now time.Time) (*StartClaim, int64) {
	var newest *StartClaim
	next := int64(1)
	for i := range claims {
		c := &claims[i]
		next = max(next, c.Seq+1)
		if c.valid(now) && (newest == nil || c.Seq > newest.Seq) {
			newest = c
		}
	}
	if newest == nil || newest.By == self {
		return nil, next
	}
	settle := clampSeconds(newest.SettleSeconds, 0, policy.MaxDuration)
	until := time.Unix(0, newest.At).Add(StartHoldFactor * seconds(settle))
	if !now.Before(until) {
		return nil, next
	}
	return newest, next
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
