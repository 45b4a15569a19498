package supervisor

import (
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/supervisor/core"
	"github.com/gpuguard/gpuguard/supervisor/sense"
)

// The facts the loop hands the decision core with an input, each read
// once, where the state it reads lives.

// good is the newest reading while the probe answers (down: the last
// call failed, and the reading is stale): none before the first sample.
func (r *latest) good(down bool) (gpu.Sample, bool) {
	return r.lastSample, r.haveSample && !down
}

// reading is good's reading in the core's type, nil when there is none.
func (r *latest) reading(down bool) *core.Reading {
	if s, ok := r.good(down); ok {
		return reading(s)
	}
	return nil
}

// claim is what a start or a live wake judged on the sample due at due
// (zero: none) knows of its turn on shared GPUs (peers: there are other
// tenants).
func (r *latest) claim(peers bool, due time.Time) core.Claim {
	return core.Claim{Peers: peers, GPUs: watchedUUIDs(r.lastSample.Devices), Due: due}
}

// startFacts are a waiting start's facts at sample r: the wait for the
// dead child's memory, whether a watched GPU is still faulted, its turn.
func (c *lifecycle) startFacts(now time.Time, r sense.Result, faulted bool, turn core.Claim) core.Start {
	w := &c.wait
	in := core.Start{Now: now, Target: w.target, Err: r.Err, Release: len(w.release) > 0,
		Waited: now.Sub(w.waitSince), Faulted: faulted, Claim: turn, First: c.hist.starts == 0, Why: w.why}
	if r.Err == nil {
		in.Devices = devices(r.Sample.Devices)
		in.Alive = anyAlive(r.Sample, w.release)
	}
	return in
}

// wakeFacts are a wake's facts at now: a held request (request), or the
// sample due at due while a wake is wanted; the newest reading (nil: none)
// and what the server used when it served judge a live wake's fit, and
// the requests the door holds whether it may make room.
func (l *loop) wakeFacts(now time.Time, request bool, due time.Time) core.Wake {
	c := &l.life
	return core.Wake{Now: now, Request: request, Stopping: c.stop.stopping || c.end.finished,
		Stopped: c.stoppedAsleep(), Live: c.steady() && c.state == api.StateAsleep, Waiting: c.state == api.StateWaiting,
		Sleeping: c.fallingAsleep(), Held: l.deps.Door != nil && l.deps.Door.Held() > 0,
		Reading: l.latest.reading(l.health.Down()), Tree: c.run.childTree, Served: l.latest.served,
		Claim: l.latest.claim(l.peers != nil, due)}
}

// idleFacts are [serve] idle's facts at now: whether the server can
// answer (the front door saw it healthy, it serves), whether a request is
// in flight or held (then it is not idle at all), and since when it has
// had nothing to do: the later of its start, its last wake and the end of
// its last answer (act).
func (c *lifecycle) idleFacts(now time.Time, act idleness) core.IdleCheck {
	return core.IdleCheck{Now: now, Since: later(c.run.childStart, act.since), Busy: act.busy,
		Ready: c.serving() && c.door.healthy}
}
