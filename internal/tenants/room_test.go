package tenants

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

const gib = 1 << 30

// sleeper is a fake tenant of gpuA that can sleep for a peer: idle for
// ten minutes, keep_awake a minute, 10 GiB of which it keeps 1 GiB
// asleep, used last at lastUsed.
func (w *world) sleeper(name string, prio int, lastUsed time.Time) *fakeTenant {
	w.t.Helper()
	f := w.tenant(name, prio, 2, 10*gib)
	f.set(func(t *api.TenantInfo) {
		t.Room = &api.TenantRoom{Serving: true, CanSleep: true, KeepAwakeSeconds: 60, SleepBytes: gib, UsedBytes: 10 * gib,
			IdleSeconds: 600, LastUsed: lastUsed.UnixNano()}
	})
	return f
}

func (w *world) makeRoom(name string, prio int, shortfall uint64) api.RoomOutcome {
	w.t.Helper()
	c := w.coordinator(name)
	w.t.Cleanup(func() { c.Close() })
	return c.MakeRoom(context.Background(), api.RoomAsk{GPU: gpuA, Priority: prio, Shortfall: shortfall})
}

// TestMakeRoomAsksTheFirstCandidate: the least recently used of two idle
// peers is asked, sleeps, and MakeRoom returns once its sleep is done;
// the other is not asked (one covers the shortfall).
func TestMakeRoomAsksTheFirstCandidate(t *testing.T) {
	w := newWorld(t)
	recent := w.sleeper("recent", 0, t0.Add(-time.Minute))
	old := w.sleeper("old", 0, t0.Add(-time.Hour))
	old.mu.Lock()
	old.sleepAfter = 300 * time.Millisecond // its drain and its sleep take a while
	old.mu.Unlock()
	began := time.Now()
	o := w.makeRoom("chat", 0, 5*gib)
	if o.Slept != "old" || o.CouldFree != 18*gib || o.Err != nil {
		t.Fatalf("MakeRoom = %+v, want old slept, 18 GiB could be freed", o)
	}
	if took := time.Since(began); took < 300*time.Millisecond {
		t.Fatalf("MakeRoom returned after %s, before the sleep was done (300ms)", took)
	}
	if s := old.sleeps(); len(s) != 1 || s[0].For != "chat" || s[0].GPU != gpuA {
		t.Fatalf("old's asks %+v, want one for chat on %s", s, gpuA)
	}
	if s := recent.sleeps(); len(s) != 0 {
		t.Fatalf("recent was asked too: %+v", s)
	}
}

// TestMakeRoomNoCandidate: busy, within keep_awake, of higher priority or
// observing, no peer is asked; and when the candidates together cannot
// cover the shortfall, none is: nobody sleeps, and CouldFree says what
// they would have freed.
func TestMakeRoomNoCandidate(t *testing.T) {
	w := newWorld(t)
	busy := w.sleeper("busy", 0, t0)
	busy.set(func(t *api.TenantInfo) { t.Room.Busy = true })
	fresh := w.sleeper("fresh", 0, t0)
	fresh.set(func(t *api.TenantInfo) { t.Room.IdleSeconds = 5 })
	high := w.sleeper("high", 5, t0)
	observing := w.sleeper("observing", 0, t0)
	observing.set(func(t *api.TenantInfo) { t.Observe = true })
	idle := w.sleeper("idle", 0, t0)
	o := w.makeRoom("chat", 0, 12*gib)
	if o.Slept != "" || o.CouldFree != 9*gib || o.RetryIn != 100*time.Millisecond {
		t.Fatalf("MakeRoom = %+v, want nobody slept, 9 GiB (idle's) could be freed, retry in 100ms (busy's request may end)", o)
	}
	for _, f := range []*fakeTenant{busy, fresh, high, observing, idle} {
		if s := f.sleeps(); len(s) != 0 {
			t.Errorf("%s was asked to sleep: %+v", f.info.Name, s)
		}
	}
}

// TestMakeRoomPassesOver: a peer that refuses (its own facts changed:
// a request came) or does not answer is passed over for the next.
func TestMakeRoomPassesOver(t *testing.T) {
	for _, how := range []string{"refuses", "hangs"} {
		t.Run(how, func(t *testing.T) {
			w := newWorld(t)
			first := w.sleeper("first", -1, t0)
			second := w.sleeper("second", 0, t0)
			first.mu.Lock()
			if how == "refuses" {
				first.refuse = errors.New("not sleeping for chat: a request is in flight or held at its door")
			} else {
				first.hang = true
			}
			first.mu.Unlock()
			if o := w.makeRoom("chat", 0, 5*gib); o.Slept != "second" {
				t.Fatalf("MakeRoom = %+v, want second slept after first %s", o, how)
			}
			if s := second.sleeps(); len(s) != 1 {
				t.Fatalf("second's asks %+v", s)
			}
		})
	}
}

// TestMakeRoomFreshFacts: the record may be stale; the ask reads each
// peer's facts fresh: one whose record says idle but whose answer says
// busy is not asked.
func TestMakeRoomFreshFacts(t *testing.T) {
	w := newWorld(t)
	f := w.sleeper("stale", 0, t0)
	f.mu.Lock()
	f.info.Room.Busy = true // in its answer, not in its record
	f.mu.Unlock()
	if o := w.makeRoom("chat", 0, gib); o.Slept != "" || len(f.sleeps()) != 0 {
		t.Fatalf("MakeRoom = %+v, asks %+v: a busy peer was asked", o, f.sleeps())
	}
}

// TestRoomChangedIsWritten: a tenant's record is written again when what
// the others' asks read of it changes.
func TestRoomChangedIsWritten(t *testing.T) {
	base := api.TenantInfo{Name: "a", GPUs: []api.TenantGPU{{UUID: gpuA}}, Room: &api.TenantRoom{Serving: true, CanSleep: true}}
	for _, tt := range []struct {
		name string
		f    func(*api.TenantInfo)
		want bool
	}{
		{"the live facts only", func(t *api.TenantInfo) { t.Room.Busy, t.Room.IdleSeconds = true, 9 }, false},
		{"no longer serving", func(t *api.TenantInfo) { t.Room.Serving = false }, true},
		{"keep_awake", func(t *api.TenantInfo) { t.Room.KeepAwakeSeconds = 5 }, true},
		{"can no longer sleep", func(t *api.TenantInfo) { t.Room = nil }, true},
		{"asleep for a peer", func(t *api.TenantInfo) { t.Room.For = "chat" }, true},
	} {
		next := base
		r := *base.Room
		next.Room = &r
		tt.f(&next)
		if got := worthWriting(&base, &next, 0); got != tt.want {
			t.Errorf("%s: worth writing %v, want %v", tt.name, got, tt.want)
		}
	}
}
