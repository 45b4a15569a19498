package supervisor

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/internal/sharing/sharingtest"
)

// TestTenantSleepRequest: another tenant's ask that this instance sleep
// for it is refused while it answered within keep_awake or has a request
// in flight, and then accepted: it sleeps through its server's actions,
// reason room, for the asker; status and its tenant answer say for whom
// until a request wakes it.
func TestTenantSleepRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pol := sleepPolicy()
		pol.Serve.Wake, pol.Serve.KeepAwake = true, 30*time.Second
		fc := &sharingtest.Coord{}
		h, c, door, acts := startServing(t, pol, withCoord(fc))
		h.sup.Healthy(1)
		time.Sleep(time.Second)
		synctest.Wait()
		ask := api.TenantSleep{GPU: fakeGPU, For: "chat", At: time.Now().UnixNano()}
		sleep := func() error { return h.sup.Admission().TenantSleep(context.Background(), ask) }
		if err := sleep(); err == nil || !strings.Contains(err.Error(), "within its keep_awake 30s") {
			t.Fatalf("1 s after it became ready: %v, want a refusal naming keep_awake", err)
		}
		if info := h.sup.Admission().TenantInfo(); info.Room == nil || !info.Room.CanSleep || !info.Room.Serving ||
			info.Room.Busy || info.Room.KeepAwakeSeconds != 30 {
			t.Fatalf("tenant answer's room %+v", info.Room)
		}
		door.answering(1)
		time.Sleep(40 * time.Second)
		synctest.Wait()
		if err := sleep(); err == nil || !strings.Contains(err.Error(), "in flight") {
			t.Fatalf("with a request in flight: %v, want a refusal", err)
		}
		if info := h.sup.Admission().TenantInfo(); !info.Room.Busy || info.Room.IdleSeconds != 0 {
			t.Fatalf("busy: tenant answer's room %+v", info.Room)
		}
		door.answering(0)
		time.Sleep(31 * time.Second)
		synctest.Wait()
		if got := acts.got(); len(got) != 0 {
			t.Fatalf("actions %v before the ask", got)
		}
		if err := sleep(); err != nil {
			t.Fatalf("idle past keep_awake: %v", err)
		}
		synctest.Wait()
		if got := acts.got(); !slices.Equal(got, []string{sleepCall}) {
			t.Fatalf("actions %v, want the sleep", got)
		}
		downs := h.rec.named(api.EventStepDown)
		if len(downs) != 1 || downs[0].Reason != api.ReasonRoom || downs[0].For != "chat" || downs[0].To != "asleep" {
			t.Fatalf("stepdown events %+v, want one to asleep, reason room, for chat", downs)
		}
		st := h.sup.Status()
		if st.State != api.StateAsleep || st.RoomFor == nil || *st.RoomFor != "chat" {
			t.Fatalf("status %s, room_for %v; want asleep for chat", st.State, st.RoomFor)
		}
		if info := h.sup.Admission().TenantInfo(); info.Room.For != "chat" || info.Room.Serving {
			t.Fatalf("asleep: tenant answer's room %+v", info.Room)
		}
		if err := sleep(); err == nil || !strings.Contains(err.Error(), "not serving") {
			t.Fatalf("asleep already: %v, want a refusal", err)
		}
		door.mu.Lock()
		door.held = 1
		door.mu.Unlock()
		h.sup.Requested(true)
		synctest.Wait()
		if st := h.sup.Status(); st.State != api.StateRunning || st.RoomFor != nil {
			t.Fatalf("after the wake: %s, room_for %v; want running, none", st.State, st.RoomFor)
		}
		c.end(Exit{})
		h.wait()
	})
}

// TestRoomAsked: a request held while asleep, whose profile does not fit,
// asks the GPU's tenants for room at once, with the shortfall; once a
// peer has slept and the memory is free, the instance wakes and journals
// room (who slept, what was freed). With make_room = false nothing is
// asked, and the wake waits for memory to free on its own.
func TestRoomAsked(t *testing.T) {
	for _, makeRoom := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			door, acts := newFakeDoor(), &fakeActions{}
			close(door.drain)
			pol := sleepPolicy()
			pol.Serve.Wake, pol.Serve.MakeRoom = true, makeRoom
			fc := &sharingtest.Coord{}
			h := startHarness(t, pol, withCoord(fc, func(c *Config, d *Deps) { c.StartLevel = 1; d.Door, d.Actions = door, acts }))
			fc.Set(func(f *sharingtest.Coord) {
				f.RoomFunc = func(ask api.RoomAsk) api.RoomOutcome {
					h.probe.setUsed(5 * gib) // the peer's sleep freed 8 GiB
					return api.RoomOutcome{GPU: ask.GPU, Slept: "coder", CouldFree: 8 * gib}
				}
			})
			c := h.child()
			c.setHandler(true)
			stepTo(t, h, "down", "asleep")
			h.probe.setUsed(13 * gib) // 1.4 GiB under high, int8 needs 6 GiB
			time.Sleep(time.Second)
			synctest.Wait()
			door.mu.Lock()
			door.held = 1
			door.mu.Unlock()
			h.sup.Requested(true)
			time.Sleep(time.Second)
			synctest.Wait()
			asks := fc.RoomAsks()
			if !makeRoom {
				if len(asks) != 0 || h.sup.Status().State != api.StateAsleep {
					t.Fatalf("make_room = false: asks %+v, state %s; want none, asleep", asks, h.sup.Status().State)
				}
				c.end(Exit{})
				h.wait()
				return
			}
			const under = 15461882265 // floor(16 GiB x 0.90)
			if len(asks) != 1 || asks[0].GPU != fakeGPU || asks[0].Shortfall != 6*gib-(under-13*gib) {
				t.Fatalf("asks %+v, want one on %s for %d bytes", asks, fakeGPU, 6*gib-(under-13*gib))
			}
			if st := h.sup.Status(); st.State != api.StateRunning || st.Profile != "int8" {
				t.Fatalf("after the room: %s in %s, want running in int8", st.State, st.Profile)
			}
			if got := acts.got(); !slices.Contains(got, wakeCall) {
				t.Fatalf("actions %v, want the wake", got)
			}
			rooms := h.rec.named(api.EventRoom)
			if len(rooms) != 1 || !slices.Equal(rooms[0].Slept, []string{"coder"}) || rooms[0].GPU != fakeGPU ||
				rooms[0].FreedBytes == nil || *rooms[0].FreedBytes != 8*gib {
				t.Fatalf("room events %+v", rooms)
			}
			c.end(Exit{})
			h.wait()
		})
	}
}

// TestFirstTenantInfo: what a peer reads of an instance before its loop's
// first event is the loop's own record, making-room facts included.
func TestFirstTenantInfo(t *testing.T) {
	pol := sleepPolicy()
	pol.Serve.Wake, pol.Serve.KeepAwake = true, 30*time.Second
	pol.Profiles[2].Needs = gib
	rec := &recorder{}
	sup, err := New(Config{Name: "t", Policy: pol, Command: pol.Command, StartLevel: 1},
		Deps{Probe: newFakeProbe(16 * gib), Launcher: newFakeLauncher(), WriteState: rec.writeState, RotateCheckpoint: rec.rotate,
			Door: newFakeDoor()})
	if err != nil {
		t.Fatal(err)
	}
	info := sup.Admission().TenantInfo()
	want := api.TenantRoom{CanSleep: true, KeepAwakeSeconds: 30, SleepBytes: gib, UsedBytes: 6 * gib}
	if info.Room == nil || info.Room.CanSleep != want.CanSleep || info.Room.Serving || info.Room.KeepAwakeSeconds != want.KeepAwakeSeconds ||
		info.Room.SleepBytes != want.SleepBytes || info.Room.UsedBytes != want.UsedBytes {
		t.Fatalf("first tenant record's room %+v, want %+v", info.Room, want)
	}
	if info.Name != "t" || info.State != api.StateStarting || info.Level != 1 || info.Levels != 3 || info.GPUs == nil {
		t.Fatalf("first tenant record %+v", info)
	}
}

// TestRoomUsedIsWhatItServedWith: where the backend lists processes, the
// room a serving instance tells its peers it frees is what its own
// processes use at the newest sample, not its profile's needs.
func TestRoomUsedIsWhatItServedWith(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newServingCalmLoop(t)
		for _, used := range []uint64{3 * gib, 5 * gib} {
			c.probe.setProcs([]gpu.Process{{PID: c.pid, Device: 0, Used: used}, {PID: c.pid + 1, Device: 0, Used: gib}})
			time.Sleep(time.Second)
			c.calmSample(c.result())
			if r := c.l.s.adm.tenant.Load().Room; r == nil || r.UsedBytes != used {
				t.Fatalf("child using %d: room %+v, want used_bytes %d", used, r, used)
			}
		}
	})
}
