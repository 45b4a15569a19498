package core

import (
	"fmt"
	"strings"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/room"
	"github.com/gpuguard/gpuguard/policy"
)

// Making room (docs/sharing.md): an instance that must wake, start or
// restart, and does not fit on one of its GPUs, asks that GPU's other
// tenants for the memory at once (AskRoom); idle ones sleep for it. The
// core decides when to ask and what an answer leads to; the agreement
// between the tenants (package sharing, over package tenants) ranks the
// candidates (package room) and asks the first to sleep, off the loop,
// and its answer comes back (RoomAnswer). A sleep's effect is measured,
// not trusted: once the peer's sleep is done the asker judges its fit on
// its own samples, and when the GPU's usage has settled (at most
// RoomSettleMax later) without room enough, it asks again, and the next
// candidate follows. The asked side is SleepFor: the peer's own core
// accepts or refuses, by its own fresh facts.

// RoomSleep is the reason of a step into the first serving = false
// profile taken for another tenant that needs room.
const RoomSleep Reason = api.ReasonRoom

// How the asker waits for room.
const (
	// RoomRetry: while the candidates cannot cover the shortfall, the
	// asker asks again this often, so that a peer that goes idle past its
	// keep_awake, stops, sleeps or changes priority is seen within it;
	// sooner (not before RoomRetryMin) when the answer says a peer kept
	// out only by time may be a candidate by then (its request ending,
	// its keep_awake passing).
	RoomRetry    = time.Second
	RoomRetryMin = 50 * time.Millisecond
	// RoomSettleMax bounds the wait for a slept peer's memory to leave the
	// GPU; RoomSettleFlat is how long the GPU's usage must not drop (by
	// more than settleGrowth) to count as settled before that.
	RoomSettleMax  = 10 * time.Second
	RoomSettleFlat = time.Second
)

// AskRoom asks the other tenants of GPU to make Shortfall bytes of room
// for this instance of Priority: the coordinator ranks the candidates and
// puts the first to sleep; its answer comes back as RoomAnswer.
type AskRoom struct {
	GPU       string
	Priority  int
	Shortfall uint64
}

// RoomAnswer is the tenants' answer to AskRoom.
type RoomAnswer struct {
	Now     time.Time
	Outcome api.RoomOutcome
}

// SleepFor is another tenant's ask that this instance sleep for it
// (`tenant_sleep`): For, of Priority, needs room on GPU. Watches: this
// instance watches that GPU; Self is this instance as a candidate, its
// live facts read now (serving, busy, idle, its door; the core fills in
// what the policy and observe mode say).
type SleepFor struct {
	Now      time.Time
	For, GPU string
	Priority int
	Watches  bool
	Self     room.Candidate
}

func (RoomAnswer) input() {}
func (SleepFor) input()   {}
func (AskRoom) effect()   {}

// roomPhase is where a wait for room stands.
type roomPhase int

const (
	roomIdle     roomPhase = iota
	roomAsked              // an ask is with the tenants
	roomSettling           // a peer slept for it: its effect is being measured
	roomShort              // the candidates cannot cover it: waiting, asking again every RoomRetry
	roomFitted             // it fits while an ask is under way: the answer says who slept for it
)

// roomWait is one wait for room: from the first ask of a start or a wake
// that does not fit until it fits (or no longer waits).
type roomWait struct {
	phase roomPhase
	gpu   string
	// began: the first ask; before: the GPU's usage then (what the sleeps
	// freed is measured against it).
	began  time.Time
	before uint64
	// need, free: the last ask's bytes needed and free on gpu (no_room's
	// figures); retryAt: no room, the next ask is due then.
	retryAt    time.Time
	need, free uint64
	slept      []string
	// sleptAt: the last peer's sleep was done; low, lowAt: the lowest
	// usage of gpu seen since, and when.
	sleptAt, lowAt time.Time
	low            uint64
	// fitAt, fitUsed: it fitted before the answer came (roomFitted), with
	// the GPU's usage then.
	fitAt   time.Time
	fitUsed uint64
	// noted: no_room was journaled for this wait; failNoted: an ask
	// that could not be made was logged.
	noted, failNoted bool
}

// roomNeed is what a start or a wake needs of a GPU: Bytes of a profile
// on Devices, less the instance's own usage there (Own, by device index).
// Allowed: it may ask for room (make_room, other tenants, not observe
// mode, and for a wake a request held).
type roomNeed struct {
	now     time.Time
	allowed bool
	devices []Device
	own     map[int]uint64
	bytes   uint64
}

// shortfall is the first of need's devices on which its bytes do not fit
// under high, and by how much (0: they fit everywhere, or there is
// nothing to judge).
func (n roomNeed) shortfall(pol *policy.Policy) (Device, uint64) {
	if n.bytes == 0 {
		return Device{}, 0
	}
	for _, d := range n.devices {
		used := d.Used - min(d.Used, n.own[d.Index])
		if r := pol.Room(used, d.Total); n.bytes > r {
			return d, n.bytes - r
		}
	}
	return Device{}, 0
}

// want is a start's or a wake's need of room. hold: the start or wake
// waits for the room (an ask or a sleep is under way) rather than go its
// usual way. It fits: a wait that put peers to sleep ends with the room
// event. It does not fit, asking is allowed: the first ask, or, once a
// slept peer's memory has settled without enough room, the next; while
// no candidate can cover it, another ask every RoomRetry, and the start
// or wake goes its usual way (it waits for memory, or starts lower).
func (r *roomWait) want(g Given, n roomNeed) (effs []Effect, hold bool) {
	d, short := n.shortfall(g.Policy)
	if short == 0 {
		return r.fit(n.now, n.devices), false
	}
	if !n.allowed {
		r.reset()
		return nil, false
	}
	switch r.phase {
	case roomIdle:
		r.began, r.before = n.now, d.Used
		return r.ask(g, d, n.bytes, short), true
	case roomAsked, roomFitted:
		return nil, true
	case roomSettling:
		if r.settling(n.now, usedOn(n.devices, r.gpu)) {
			return nil, true
		}
		return r.ask(g, d, n.bytes, short), true
	}
	if !n.now.Before(r.retryAt) {
		return r.ask(g, d, n.bytes, short), false
	}
	return nil, false
}

// ask asks the tenants of d for short bytes of room for a profile that
// needs bytes.
func (r *roomWait) ask(g Given, d Device, bytes, short uint64) []Effect {
	r.phase, r.gpu = roomAsked, d.UUID
	r.need, r.free = bytes, g.Policy.Room(d.Used, d.Total)
	return []Effect{AskRoom{GPU: d.UUID, Priority: g.Policy.Priority, Shortfall: short}}
}

// settling reports whether a slept peer's memory may still be leaving
// the GPU (used now): less than RoomSettleMax since its sleep was done,
// and the usage still dropping within RoomSettleFlat.
func (r *roomWait) settling(now time.Time, used uint64) bool {
	if now.Sub(r.sleptAt) >= RoomSettleMax {
		return false
	}
	if r.lowAt.IsZero() || used+settleGrowth < r.low {
		r.low, r.lowAt = used, now
		return true
	}
	return now.Sub(r.lowAt) < RoomSettleFlat
}

// answer takes the tenants' answer to the ask under way: a peer slept
// (measure it), or no candidate can cover the shortfall (no_room, once
// per wait), or the ask could not be made (said once; asked again).
func (r *roomWait) answer(in RoomAnswer) []Effect {
	o := in.Outcome
	if r.phase == roomFitted {
		if o.Slept != "" {
			r.slept = append(r.slept, o.Slept)
		}
		return r.made(r.fitAt, r.fitUsed)
	}
	if r.phase != roomAsked {
		return nil // the wait ended meanwhile
	}
	switch {
	case o.Err != nil:
		r.phase, r.retryAt = roomShort, in.Now.Add(RoomRetry)
		if r.failNoted {
			return nil
		}
		r.failNoted = true
		return []Effect{Log{fmt.Sprintf("cannot ask the tenants of GPU %s for room (%v); asking again", o.GPU, o.Err)}}
	case o.Slept != "":
		r.slept = append(r.slept, o.Slept)
		r.phase, r.sleptAt, r.lowAt = roomSettling, in.Now, time.Time{}
		return []Effect{Log{fmt.Sprintf("%s sleeps to make room on GPU %s", o.Slept, o.GPU)}, SampleNow{}}
	}
	retry := RoomRetry
	if o.RetryIn > 0 {
		retry = min(max(o.RetryIn, RoomRetryMin), RoomRetry)
	}
	r.phase, r.retryAt = roomShort, in.Now.Add(retry)
	if r.noted {
		return nil
	}
	r.noted = true
	free, could := r.free, o.CouldFree
	detail := fmt.Sprintf("GPU %s: %s needed, %s free under high, the idle peers could free %s; waiting",
		r.gpu, policy.FormatSize(r.need), policy.FormatSize(free), policy.FormatSize(could))
	return []Effect{
		Journal{api.Event{Event: api.EventNoRoom, GPU: r.gpu, NeedBytes: r.need, FreeBytes: &free, CouldFreeBytes: &could, Detail: detail}},
		Log{"no room: " + detail},
	}
}

// fit ends a wait that now fits (devices: the reading that says so). A
// peer's sleep frees its memory before it is done (its `until`, its
// answer), so a wait often fits while its ask is under way: then the
// answer names who slept (roomFitted); the start or wake goes ahead at
// once either way.
func (r *roomWait) fit(now time.Time, devices []Device) []Effect {
	switch r.phase {
	case roomIdle, roomFitted:
		return nil
	case roomAsked:
		r.phase, r.fitAt, r.fitUsed = roomFitted, now, usedOn(devices, r.gpu)
		return nil
	}
	return r.made(now, usedOn(devices, r.gpu))
}

// made ends a wait that fitted at at, with the GPU's usage used then: when
// peers slept for it, with the room event (the GPU's measured drop, the
// seconds from the first ask).
func (r *roomWait) made(at time.Time, used uint64) []Effect {
	var effs []Effect
	if len(r.slept) > 0 {
		freed := r.before - min(r.before, used)
		secs := at.Sub(r.began).Seconds()
		detail := fmt.Sprintf("GPU %s: %s slept, %s freed, fits after %.1fs", r.gpu, strings.Join(r.slept, ", "), policy.FormatSize(freed), secs)
		effs = []Effect{
			Journal{api.Event{Event: api.EventRoom, GPU: r.gpu, Slept: r.slept, FreedBytes: &freed, Seconds: secs, Detail: detail}},
			Log{"room made: " + detail},
		}
	}
	r.reset()
	return effs
}

// reset forgets the wait.
func (r *roomWait) reset() { *r = roomWait{} }

// launched ends the wait of a start that has launched, but for one whose
// answer is still to say who slept for it.
func (r *roomWait) launched() {
	if r.phase != roomFitted {
		r.reset()
	}
}

// usedOn is the usage of GPU uuid in devices (0: not there).
func usedOn(devices []Device, uuid string) uint64 {
	for _, d := range devices {
		if d.UUID == uuid {
			return d.Used
		}
	}
	return 0
}

// sleepFor decides another tenant's ask that this instance sleep for it:
// it does when it is a candidate by its own facts of the moment (Why), to
// its first serving = false profile through the usual change, reason
// room; else it refuses, saying why. The reply goes first: the asker
// learns that the sleep is under way and follows it.
func (st State) sleepFor(g Given, in SleepFor) (State, []Effect) {
	pol := g.Policy
	to := FirstAsleep(pol.Profiles)
	self := in.Self
	self.Priority, self.Observe, self.KeepAwake = pol.Priority, g.Observe, pol.Serve.KeepAwake
	self.CanSleep = self.CanSleep && to >= 0 && pol.Serve.Wake
	self.Serving = self.Serving && pol.Profiles[g.Level].Serving()
	why := room.Why(self, in.Priority)
	if !in.Watches {
		why = "it does not watch GPU " + in.GPU
	}
	if why != "" {
		return st, []Effect{Reply{fmt.Errorf("not sleeping for %s: %s", in.For, why)}}
	}
	st.steppedForGood(in.Now)
	return st, []Effect{
		Reply{},
		Step{Now: in.Now, To: to, Reason: RoomSleep, Event: api.EventStepDown, For: in.For,
			Why: fmt.Sprintf("making room for %s on GPU %s (idle %s)", in.For, in.GPU, self.Idle.Round(time.Millisecond))},
	}
}
