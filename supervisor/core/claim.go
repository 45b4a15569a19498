package core

import (
	"fmt"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// One start at a time on a shared GPU: before a launch (or a live wake,
// which takes back memory as a start takes it) the instance claims the
// start of every watched GPU, waits while another tenant is starting,
// then chooses on a sample taken after the grant, so that `needs` is
// checked against what the earlier tenant really uses. Its own start
// lasts until the child's memory is flat for `settle`, the child says
// ready, StartHoldFactor x settle pass, or the child exits. The claim
// itself is made by the agreement between the tenants (package sharing),
// off the loop: the core says when (ClaimStart) and takes the answer
// (ClaimAnswer).

// claimPhase is where the instance's claim stands.
type claimPhase int

const (
	claimIdle     claimPhase = iota
	claimAsked               // the claim is with the tenants
	claimGranted             // claimed: go ahead on the next fresh sample
	claimLaunched            // the child runs and has not settled
)

// claim is the instance's one-start-at-a-time claim. The other tenants
// see it as starting from the ask to the end (EndStart).
type claim struct {
	phase claimPhase
	// granted: a sample due before then (in flight at the grant) must not
	// choose the profile.
	granted    time.Time
	launchedAt time.Time
	settle     settleTracker
	// waitingFor is the tenant last said to be starting ("": none).
	waitingFor string
}

// Claim is what a start or a live wake knows of its turn on shared GPUs.
type Claim struct {
	Peers bool     // there are other tenants to agree with
	GPUs  []string // the watched GPUs' UUIDs (none known: nothing to agree on)
	// Due is when the sample judged was due; zero: no sample (a request
	// between samples).
	Due time.Time
}

// ClaimAnswer is the tenants' answer to a claim. Waiting: the start still
// waits; Asleep: the instance is asleep (a live wake claims as a start
// does); Stopping: a stop is under way or the run is over.
type ClaimAnswer struct {
	Now                       time.Time
	Outcome                   api.StartOutcome
	Waiting, Asleep, Stopping bool
}

// Settling is a sample's word (or a failed call's: Read false) on a
// start under way: the child's memory, Used of Total, while a child runs
// (Running).
type Settling struct {
	Now           time.Time
	Read, Running bool
	Used, Total   uint64
}

// Ready ends a start under way: the child said it is ready, or answered
// its health check (Why says which).
type Ready struct{ Why string }

// ClaimStart asks the tenants of GPUs for the one start at a time;
// Settle is how long a start lasts once its memory is flat.
type ClaimStart struct {
	GPUs   []string
	Settle time.Duration
}

// EndStart ends the instance's start (or an attempt at one): the other
// tenants may start theirs. Log, when set, is the line that says the
// start is complete.
type EndStart struct{ Log string }

func (ClaimAnswer) input() {}
func (Settling) input()    {}
func (Ready) input()       {}
func (ClaimStart) effect() {}
func (EndStart) effect()   {}

// gate is the one start at a time for a start or a live wake judged on
// the sample in.Due. ok: it may go ahead: with no other tenant, no GPU
// known, no claim worth holding (worth false), or once the claim is
// granted and the sample was taken after the grant. Otherwise it asks
// for the claim (ClaimStart, with settle), or waits for the answer or for
// a fresh sample (SampleNow).
func (c *claim) gate(in Claim, worth bool, settle time.Duration) ([]Effect, bool) {
	switch {
	case !in.Peers:
		return nil, true
	case c.phase == claimAsked:
		return nil, false
	case c.phase == claimGranted && (in.Due.IsZero() || in.Due.Before(c.granted)):
		return []Effect{SampleNow{}}, false
	case c.phase != claimIdle:
		return nil, true
	case len(in.GPUs) == 0 || !worth:
		return nil, true
	}
	c.phase = claimAsked
	return []Effect{ClaimStart{GPUs: in.GPUs, Settle: settle}}, false
}

// answer takes the tenants' answer to the claim asked (waking: a held
// request's wake is wanted). A claim no longer wanted ends; a granted one
// (or one whose agreement failed: the start goes ahead anyway) chooses on
// a fresh sample; a refused one waits for the tenant that is starting,
// said once per tenant.
func (c *claim) answer(in ClaimAnswer, waking bool) []Effect {
	if c.phase != claimAsked {
		return nil
	}
	if !(in.Waiting || in.Asleep && waking) || in.Stopping {
		return c.end("")
	}
	o := in.Outcome
	var effs []Effect
	switch {
	case o.Err != nil:
		effs = append(effs, Log{fmt.Sprintf("cannot claim the start on GPU %s (%v); starting anyway", o.GPU, o.Err)})
	case !o.Granted:
		effs = c.end("")
		if c.waitingFor != o.Holder {
			c.waitingFor = o.Holder
			effs = append(effs, Log{fmt.Sprintf("waiting for %s to finish starting on GPU %s (one start at a time)", o.Holder, o.GPU)})
		}
		return effs
	}
	c.waitingFor = ""
	c.phase, c.granted = claimGranted, in.Now
	return append(effs, SampleNow{})
}

// began follows a launch (or a live wake) at now with used memory: a
// granted start lasts until the child's memory is flat for settle; any
// other claim ends.
func (c *claim) began(now time.Time, used uint64, settle time.Duration) []Effect {
	if c.phase != claimGranted {
		return c.end("")
	}
	c.phase, c.launchedAt = claimLaunched, now
	c.settle = newSettleTracker(now, settle, used)
	return nil
}

// settling ends a start whose child's memory has been flat for settle,
// or that has lasted StartHoldFactor x settle.
func (c *claim) settling(in Settling, settle time.Duration) []Effect {
	if c.phase != claimLaunched || !in.Running {
		return nil
	}
	switch {
	case in.Read && c.settle.observe(in.Now, in.Used, in.Total):
		return c.end("its memory has not grown for " + settle.String())
	case in.Now.Sub(c.launchedAt) >= api.StartHoldFactor*settle:
		return c.end("10 x settle (" + (api.StartHoldFactor * settle).String() + ") passed")
	}
	return nil
}

// end ends the instance's start or its attempt at one; why is said when
// a start completes.
func (c *claim) end(why string) []Effect {
	if c.phase == claimIdle {
		return nil
	}
	e := EndStart{}
	if c.phase == claimLaunched && why != "" {
		e.Log = "start complete: " + why
	}
	c.phase = claimIdle
	return []Effect{e}
}

// endGranted ends a claim granted for a start or a wake that will not
// happen after all.
func (c *claim) endGranted() []Effect {
	if c.phase != claimGranted {
		return nil
	}
	return c.end("")
}

// settleGrowth is the least growth that counts: memory that grows by less
// than this above its running peak (or 1% of the memory it is measured
// against, whichever is more) is flat. Allocators round and fragment, and a
// server serving its first requests wobbles by a few MiB; what matters for
// the next tenant's sizing is the big allocations (weights, KV cache).
const settleGrowth = 64 << 20

// settleTracker says when a starting child's memory has stopped growing:
// no growth above its running peak for `settle`.
type settleTracker struct {
	settle time.Duration
	since  time.Time // the last growth (at first: the launch)
	peak   uint64
}

// newSettleTracker starts at the launch, from baseline: 0 for the child's
// own usage, the device's used memory when only that is known (it holds
// the other tenants' memory too).
func newSettleTracker(launched time.Time, settle time.Duration, baseline uint64) settleTracker {
	return settleTracker{settle: settle, since: launched, peak: baseline}
}

// observe feeds one reading, used bytes out of total, and reports whether
// the memory has now been flat for settle.
func (s *settleTracker) observe(now time.Time, used, total uint64) bool {
	if used > s.peak && used-s.peak > max(uint64(settleGrowth), total/100) {
		s.peak, s.since = used, now
	}
	return now.Sub(s.since) >= s.settle
}
