package supervisor

import (
	"fmt"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/policy"
	"github.com/gpuguard/gpuguard/supervisor/core"
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
	// served is what the child's processes used at the newest sample while
	// it served (0: not known), the needs of a wake into a serving profile
	// that states none (core.WakeFit).
	served uint64
}

// onWanted takes a held request's wish to wake the server.
func (l *loop) onWanted() {
	if !l.pol.Serve.Wake || l.pol.Profiles[l.level].Serving() || l.life.stop.stopping || l.life.end.finished {
		return
	}
	l.wake.want = true
	l.tryWake(nil)
}

// tryWake steps up to the nearest serving profile for a held request, as
// soon as it can: a stopped child is started again (the start waits for
// that profile to fit, in the shared-GPU start order); a sleeping one is
// woken live once the profile fits and, on a shared GPU, once it holds the
// one-start-at-a-time claim (wakeClaimed). It runs at every sample until
// then; r is that sample, nil when a request asks between samples.
func (l *loop) tryWake(r *sampleResult) {
	if !l.wake.want {
		return
	}
	to := nearestServing(l.pol.Profiles, l.level)
	if to < 0 || l.pol.Profiles[l.level].Serving() {
		l.wake.want = false
		if l.life.state != api.StateWaiting && l.shared.start.phase == startGranted {
			l.shared.endStarting("") // a wake's claim, no longer needed
		}
		return
	}
	const why = "a request arrived while asleep"
	switch {
	case l.stoppedAsleep():
		l.wake.want = false
		l.wakeStopped(to, api.ReasonRequest, why, nil)
	case l.life.run.child != nil && l.life.state == api.StateAsleep && !l.acts.acting() && l.life.plan == nil && !l.life.stop.stopping:
		if fit := l.wakeFit(to); fit != "" {
			if l.shared.start.phase == startGranted {
				l.shared.endStarting("") // the claim's fresh sample says it does not fit
			}
			return // not yet: the request waits, up to hold
		}
		if !l.wakeClaimed(r) {
			return
		}
		l.wake.want = false
		now := time.Now()
		l.core.Rules.Stepped(now)
		if l.changeProfile(to, api.ReasonRequest, why, nil) {
			l.beganStarting(now) // the claim lasts until the woken server's memory settles
		} else if l.shared.start.phase == startGranted {
			l.shared.endStarting("")
		}
	}
}

// wakeClaimed reports whether a live wake may go ahead. A server that wakes
// takes back the memory it freed, as a start takes memory, so on a shared
// GPU it goes in the start order: it claims the one start at a time first
// (its peers see it starting), and its fit is judged again on a sample
// taken after the grant, as a start's is. Without a coordinator, or with
// no GPU known yet, there is nothing to agree on.
func (l *loop) wakeClaimed(r *sampleResult) bool {
	return l.claimGate(r, func() bool { return true })
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
	if idle <= 0 || l.deps.Door == nil || l.life.run.child == nil || !l.door.healthy || l.life.stop.stopping || l.life.plan != nil || l.acts.acting() ||
		l.life.state != api.StateRunning || !l.pol.Profiles[l.level].Serving() {
		return
	}
	to := firstAsleep(l.pol.Profiles)
	if to < 0 {
		return
	}
	last := l.life.run.childStart
	if l.wake.awake.After(last) {
		last = l.wake.awake
	}
	if r := time.Unix(0, l.s.lastRequest.Load()); r.After(last) {
		last = r
	}
	if now.Sub(last) < idle {
		return
	}
	l.core.Rules.Stepped(now)
	l.changeProfile(to, api.ReasonIdle, fmt.Sprintf("no request for %s", idle), nil)
}

// wakeSample runs the wake and idle rules after each sample r.
func (l *loop) wakeSample(now time.Time, r sampleResult) {
	l.noteServed(r)
	l.tryWake(&r)
	l.checkIdle(now)
}

// noteServed keeps what the child's processes use while it serves, for a
// later wake's fit (wakeFit).
func (l *loop) noteServed(r sampleResult) {
	if r.err != nil || r.sample.ProcessesAt.IsZero() || l.life.run.child == nil || l.life.state != api.StateRunning ||
		l.acts.acting() || !l.pol.Profiles[l.level].Serving() {
		return
	}
	var used uint64
	for _, p := range r.sample.Processes {
		if l.life.run.childTree[p.PID] {
			used += p.Used
		}
	}
	l.wake.served = used
}

// wakeFit judges whether profile to fits for a wake: see core.WakeFit.
func (l *loop) wakeFit(to int) string {
	var r *core.Reading
	if l.latest.haveSample && !l.health.down() {
		r = reading(l.latest.lastSample)
	}
	return core.WakeFit(l.pol, l.level, to, r, l.life.run.childTree, l.wake.served)
}
