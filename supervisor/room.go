package supervisor

import (
	"fmt"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/room"
	"github.com/gpuguard/gpuguard/policy"
	"github.com/gpuguard/gpuguard/supervisor/core"
)

// Making room, as the loop carries it out. The asker's side is the core's
// decision (core.AskRoom, core.RoomAnswer, fed in loop.go and effects.go);
// the asked side is here: what this instance tells the other tenants of
// itself as a candidate (self.room in its tenant record, liveRoom in the
// `tenant` answer), and a tenant's ask that it sleep for it
// (onTenantSleep), which its core decides by its own facts of the moment.

// onTenantSleep hands the core another tenant's ask that this instance
// sleep for it, with this instance's facts read now; the core replies.
func (l *loop) onTenantSleep(r request) {
	ts := r.tenantSleep
	if l.peers == nil {
		r.reply <- response{err: fmt.Errorf("%s shares no GPU with other tenants", l.cfg.Name)}
		return
	}
	now := time.Now()
	l.feed(core.SleepFor{Now: now, For: ts.For, GPU: ts.GPU, Priority: ts.Priority,
		Watches: l.self.tenant(now, l.pol).Watches(ts.GPU), Self: l.self.candidate(now)}, r.reply)
}

// candidate is this instance as a candidate to sleep for a peer, at now:
// the live facts by which it may (room.Why; the core adds the policy's).
// What it would free is the asker's to weigh, from its tenant record and
// the `tenant` answer, not this instance's.
func (me *self) candidate(now time.Time) room.Candidate {
	act := me.act.read()
	return room.Candidate{Name: me.name, Serving: me.life.serving() && me.life.door.healthy, CanSleep: me.canSleep,
		Busy: act.busy, Idle: act.idle(now, me.started), LastUsed: act.lastUsed}
}

// room is what the other tenants' rankings read of this instance in its
// tenant record (the facts that change with each request are the
// `tenant` answer's: liveRoom); ok is false when it can never sleep for
// a peer: no front door, or nothing to sleep in.
func (me *self) room(pol *policy.Policy) (r api.TenantRoom, ok bool) {
	c := me.life
	asleep := core.FirstAsleep(pol.Profiles)
	if !me.canSleep || asleep < 0 || !pol.Serve.Wake {
		return api.TenantRoom{}, false
	}
	r = api.TenantRoom{CanSleep: true, Serving: c.serving() && c.door.healthy && pol.Profiles[c.level].Serving(),
		KeepAwakeSeconds: pol.Serve.KeepAwake.Seconds(), SleepBytes: pol.Profiles[asleep].Needs, For: c.sleepsForName(pol)}
	// What it uses, as a peer reads it: what its processes used when it
	// last served (known where the backend lists processes), else its
	// profile's needs.
	r.UsedBytes = me.latest.served
	if r.UsedBytes == 0 {
		r.UsedBytes = pol.Profiles[c.level].Needs
	}
	return r, true
}

// liveRoom fills in the making-room facts of the `tenant` answer that
// change with every request: whether one is in flight or held, how long
// the instance has been idle, when it last answered. Safe from any
// goroutine.
func (s *Supervisor) liveRoom(r *api.TenantRoom) {
	act := s.act.read()
	r.Busy = act.busy
	r.IdleSeconds = act.idle(time.Now(), s.started).Seconds()
	if !act.lastUsed.IsZero() {
		r.LastUsed = act.lastUsed.UnixNano()
	}
}

// sleepsForName is the peer this instance sleeps for ("": none): the
// last step down was taken for it, and the instance has not left its
// serving = false profile since.
func (c *lifecycle) sleepsForName(pol *policy.Policy) string {
	if pol.Profiles[c.level].Serving() {
		return ""
	}
	return c.roomFor
}

// forRoom adds to a step event the peer a step with reason room is taken
// for.
func (c *lifecycle) forRoom(ev api.Event) api.Event {
	if ev.Reason == api.ReasonRoom {
		ev.For = c.roomFor
	}
	return ev
}
