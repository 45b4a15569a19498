package supervisor

import (
	"fmt"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/policy"
)

// Requested is the front door's report of a request's arrival; held says
// it found the child not ready, so it waits. It never blocks: the time is
// stored for the idle rule, and a held request asks the loop to wake a
// sleeping server ([serve] wake).
func (s *Supervisor) Requested(held bool) {
	s.lastRequest.Store(time.Now().UnixNano())
	if !held {
		return
	}
	select {
	case s.wanted <- struct{}{}:
	default: // a wake is already asked for
	}
}

// wakeState is the loop's side of waking on request.
type wakeState struct {
	want bool // a held request asked for a wake not yet begun
	// awake is when the server last became able to serve (its first
	// healthy answer, or a wake by a live change), for the idle rule.
	awake time.Time
}

// onWanted takes a held request's wish to wake the server.
func (l *loop) onWanted() {
	if !l.pol.Serve.Wake || l.pol.Profiles[l.level].Serving() || l.stopping || l.finished {
		return
	}
	l.wake.want = true
	l.tryWake()
}

// tryWake steps up to the nearest serving profile for a held request, as
// soon as it can: a stopped child is started again (the start waits for
// that profile to fit, in the shared-GPU start order); a sleeping one is
// woken live once the profile fits. It runs at every sample until then.
func (l *loop) tryWake() {
	if !l.wake.want {
		return
	}
	to := nearestServing(l.pol.Profiles, l.level)
	if to < 0 || l.pol.Profiles[l.level].Serving() {
		l.wake.want = false
		return
	}
	const why = "a request arrived while asleep"
	switch {
	case l.stoppedAsleep():
		l.wake.want = false
		l.wakeStopped(to, api.ReasonRequest, why, nil)
	case l.child != nil && l.state == api.StateAsleep && !l.acts.acting() && l.plan == nil && !l.stopping:
		if fit := l.stepFit(to); fit != "" {
			return // not yet: the request waits, up to hold
		}
		l.wake.want = false
		l.rules.stepped(time.Now())
		l.changeProfile(to, api.ReasonRequest, why, nil)
	}
}

// nearestServing is the serving profile of ps closest above level (every
// serving profile comes before every serving = false one), or -1.
func nearestServing(ps []policy.Profile, level int) int {
	for i := level; i >= 0; i-- {
		if ps[i].Serving() {
			return i
		}
	}
	return -1
}

// firstAsleep is the first serving = false profile of ps, or -1.
func firstAsleep(ps []policy.Profile) int {
	for i, p := range ps {
		if !p.Serving() {
			return i
		}
	}
	return -1
}

// checkIdle applies [serve] idle: no request for that long, while the
// server serves, steps down to the first serving = false profile. The
// count starts when the child is ready (its first healthy answer, or a
// wake), never at its launch: a server still loading its weights has not
// been idle, it has not been able to answer.
func (l *loop) checkIdle(now time.Time) {
	idle := l.pol.Serve.Idle
	if idle <= 0 || l.deps.Door == nil || l.child == nil || !l.door.healthy || l.stopping || l.plan != nil || l.acts.acting() ||
		l.state != api.StateRunning || !l.pol.Profiles[l.level].Serving() {
		return
	}
	to := firstAsleep(l.pol.Profiles)
	if to < 0 {
		return
	}
	last := l.childStart
	if l.wake.awake.After(last) {
		last = l.wake.awake
	}
	if r := time.Unix(0, l.s.lastRequest.Load()); r.After(last) {
		last = r
	}
	if now.Sub(last) < idle {
		return
	}
	l.rules.stepped(now)
	l.changeProfile(to, api.ReasonIdle, fmt.Sprintf("no request for %s", idle), nil)
}

// wakeSample runs the wake and idle rules after each sample.
func (l *loop) wakeSample(now time.Time) {
	l.tryWake()
	l.checkIdle(now)
}
