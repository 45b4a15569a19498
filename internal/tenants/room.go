package tenants

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/control"
	"github.com/gpuguard/gpuguard/internal/room"
	"github.com/gpuguard/gpuguard/policy"
)

// Making room: an instance that needs room on a GPU asks the tenants the
// records of that GPU name as ones that can sleep (t.<name>, Room set),
// each over its socket for its fresh facts (busy, idle, usage: they
// change with every request, so the record's copy is stale), ranks them
// (package room), and asks the first to sleep (`tenant_sleep`). The asked
// tenant decides by its own facts; one that refuses or does not answer is
// passed over for the next. An accepted sleep is followed until it is
// done (the tenant's `tenant` answer says asleep), so that the asker
// measures what it freed.

// roomPoll is how often a tenant that accepted to sleep is asked whether
// its sleep is done; roomAway is how long it may take to show that it
// began (else the sleep is taken as done, and the asker's measurement
// judges); roomSleepLimit bounds the whole wait (the tenant's own drain
// and actions are bounded by its stop_timeout and their timeouts).
const (
	roomPoll       = 50 * time.Millisecond
	roomAway       = 2 * time.Second
	roomSleepLimit = 5 * time.Minute
)

// MakeRoom asks the tenants of ask.GPU to make ask.Shortfall bytes of
// room for this instance: the fewest candidates in rank order that cover
// it are chosen, and the first of them that accepts is put to sleep;
// MakeRoom returns once its sleep is done. Slept is empty when no
// candidate can cover the shortfall, or none accepted.
func (c *Coordinator) MakeRoom(ctx context.Context, ask api.RoomAsk) api.RoomOutcome {
	out := api.RoomOutcome{GPU: ask.GPU}
	dir, err := GPUDir(c.o.RuntimeDir, ask.GPU)
	if err != nil {
		out.Err = err
		return out
	}
	c.maybeSweep(dir)
	cands := c.roomCandidates(ctx, dir, ask)
	for first := true; ; first = false {
		chosen, could := room.Choose(cands, ask.Priority, ask.Shortfall)
		if first {
			out.CouldFree = could
		}
		if len(chosen) == 0 || ctx.Err() != nil {
			out.RetryIn = soonest(cands, ask.Priority)
			return out
		}
		w := chosen[0]
		socket := c.socket(w.Name)
		ts := api.TenantSleep{GPU: ask.GPU, For: c.o.Name, Priority: ask.Priority, At: c.o.Now().UnixNano()}
		_, err := request(ctx, c.o.PeerTimeout, socket, func(cl *control.Client, ctx context.Context) (struct{}, error) {
			return struct{}{}, cl.TenantSleep(ctx, ts)
		})
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				c.silence.passOver(w.Name)
			}
			c.o.Logf("shared GPU %s: %s does not sleep to make room (%v); asking the next tenant", ask.GPU, w.Name, err)
			cands = slices.DeleteFunc(cands, func(x room.Candidate) bool { return x.Name == w.Name })
			continue
		}
		c.followSleep(ctx, socket)
		out.Slept = w.Name
		return out
	}
}

// roomCandidates are the tenants of the GPU in dir that may sleep for an
// asker of ask.Priority, by their records (they can sleep, they are not
// observing, their priority is no higher), with their facts as each
// answers them now, at once and each within PeerTimeout; one that does
// not answer is left out.
func (c *Coordinator) roomCandidates(ctx context.Context, dir string, ask api.RoomAsk) []room.Candidate {
	var static []Candidate
	for _, t := range c.tenants(dir) {
		if t.Watches(ask.GPU) && t.Room != nil && t.Room.CanSleep && !t.Observe && t.Priority <= ask.Priority {
			static = append(static, t)
		}
	}
	fresh := make([]*api.TenantInfo, len(static))
	var wg sync.WaitGroup
	for i, t := range static {
		wg.Go(func() {
			info, err := c.ask(ctx, t.Socket)
			if err != nil {
				if errors.Is(err, context.DeadlineExceeded) {
					c.silence.passOver(t.Name)
				}
				return
			}
			info.Name = t.Name // the record's name is the identity
			clampInfo(&info)
			fresh[i] = &info
		})
	}
	wg.Wait()
	var out []room.Candidate
	for _, info := range fresh {
		if info != nil && info.Room != nil {
			out = append(out, candidate(*info, ask.GPU))
		}
	}
	return out
}

// soonest is how soon the first of cands kept out only by time may be a
// candidate (room.Soon); 0 when none is.
func soonest(cands []room.Candidate, asker int) time.Duration {
	var d time.Duration
	for _, c := range cands {
		if s, ok := room.Soon(c, asker); ok && (d == 0 || s < d) {
			d = s
		}
	}
	return d
}

// candidate is tenant t as a candidate to sleep for room on gpu: its own
// measured usage there, but no less than what it says it uses while it
// serves (a server just woken has not been measured since: its last
// sample still shows it asleep). What its sleep really frees is measured
// by the asker; too little, and the next candidate follows.
func candidate(t api.TenantInfo, gpu string) room.Candidate {
	r := t.Room
	used, _ := t.Used(gpu)
	used = max(used, r.UsedBytes)
	c := room.Candidate{Name: t.Name, Priority: t.Priority, Serving: r.Serving && canStep(t.State), CanSleep: r.CanSleep,
		Observe: t.Observe, Busy: r.Busy, Idle: clamped(r.IdleSeconds), KeepAwake: clamped(r.KeepAwakeSeconds),
		UsedBytes: used, SleepBytes: r.SleepBytes}
	if r.LastUsed > 0 {
		c.LastUsed = time.Unix(0, r.LastUsed)
	}
	return c
}

// clamped is a peer's count of seconds as a duration, held to the range
// a policy allows.
func clamped(s float64) time.Duration { return seconds(clampSeconds(s, 0, policy.MaxDuration)) }

// followSleep waits until the tenant at socket that accepted to sleep has
// done so: its `tenant` answer says asleep; or it was stepping and is
// back (woken by a request of its own, or its sleep fell through); or it
// never showed its sleep within roomAway; or it stopped answering. Either
// way the asker measures what the sleep freed on its own samples.
func (c *Coordinator) followSleep(ctx context.Context, socket string) {
	t := time.NewTicker(roomPoll)
	defer t.Stop()
	began := time.Now()
	away := false
	for time.Since(began) < roomSleepLimit {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		info, err := c.ask(ctx, socket)
		if err != nil {
			return
		}
		switch {
		case info.State == api.StateAsleep:
			return
		case info.State == api.StateStepping || info.Room == nil || !info.Room.Serving:
			away = true
		case away, time.Since(began) >= roomAway:
			return
		}
	}
}

// roomChanged reports whether the making-room facts of a tenant's record
// changed in a way the others' asks read (the live ones are asked for).
func roomChanged(a, b *api.TenantRoom) bool {
	if a == nil || b == nil {
		return a != b
	}
	return a.Serving != b.Serving || a.CanSleep != b.CanSleep || a.KeepAwakeSeconds != b.KeepAwakeSeconds ||
		a.SleepBytes != b.SleepBytes || a.For != b.For
}
