package core

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/room"
	"github.com/gpuguard/gpuguard/policy"
)

// roomy is a ladder of one serving profile that needs 10 GiB and one
// that sleeps through the server's API, behind a front door that wakes
// it on request and may make room.
func roomy(p *policy.Policy) {
	p.Serve.Wake, p.Serve.MakeRoom, p.Serve.KeepAwake = true, true, time.Minute
	p.Watch.Settle = time.Second
	p.Profiles = []policy.Profile{
		{Name: "awake", Needs: 10 * gib, Live: true},
		{Name: "nap", NotServing: true, Live: true, Needs: gib, Enter: []policy.Action{{Path: "/sleep"}}},
	}
}

// TestRoomDecisions: when a wake or a start asks its GPU's tenants for
// room, and what their answers lead to: at once when it does not fit; a
// slept peer measured, then the fit (room) or, once the GPU's usage has
// settled without room enough, the next ask; no room journaled once per
// wait and asked again every RoomRetry; never with make_room = false,
// in observe mode, alone, or for a wake with no request held; a first
// start only when no profile fits, a restart for the profile it aims at;
// and a start never in a serving = false profile.
func TestRoomDecisions(t *testing.T) {
	// The sleeping instance's own process (pid 7) holds 1 GiB.
	used := func(u uint64) *Reading {
		return &Reading{Devices: []Device{{Index: 0, UUID: "a", Used: u, Total: 16 * gib}},
			Processes: []Process{{PID: 7, Used: gib}}, ProcessesAt: t0}
	}
	full, free := used(12*gib), used(2*gib)
	claim := func(d time.Duration) Claim { return Claim{Peers: true, GPUs: []string{"a"}, Due: at(d)} }
	wake := func(d time.Duration, r *Reading) Wake {
		return Wake{Now: at(d), Live: true, Held: true, Reading: r, Tree: map[int]bool{7: true}, Claim: claim(d)}
	}
	request := func(w Wake) Wake { w.Request = true; return w }
	slept := func(d time.Duration, who string) RoomAnswer {
		return RoomAnswer{Now: at(d), Outcome: api.RoomOutcome{GPU: "a", Slept: who, CouldFree: 9 * gib}}
	}
	noRoom := func(d time.Duration) RoomAnswer {
		return RoomAnswer{Now: at(d), Outcome: api.RoomOutcome{GPU: "a", CouldFree: 2 * gib}}
	}
	devs := func(u uint64) []Device { return []Device{{Index: 0, UUID: "a", Used: u, Total: 16 * gib}} }
	start := func(d time.Duration, u uint64, first bool) Start {
		return Start{Now: at(d), Devices: devs(u), Target: 0, Claim: claim(d), First: first}
	}
	// 12 GiB used, 1 GiB of it the sleeper's own: 11 GiB of others, 3.4
	// GiB under high (14.4 GiB), 6.6 GiB short of awake's 10 GiB.
	const ask = "ask room on a for 6.6 GiB"
	for _, tc := range []row{
		{"a held wake that does not fit asks at once; a slept peer, then the fit, the room event and its turn", roomy, false, []in{
			{1, request(wake(0, full)), ask},
			{1, wake(100*time.Millisecond, full), ""}, // the ask is with the tenants
			{1, slept(200*time.Millisecond, "b"), "log; sample now"},
			{1, wake(300*time.Millisecond, free), "journal room; log; claim [a]"},
			{1, ClaimAnswer{Now: at(400 * time.Millisecond), Outcome: api.StartOutcome{Granted: true}, Asleep: true}, "sample now"},
			{1, wake(500*time.Millisecond, free), "step stepup to 0 (request)"},
		}},
		{"it fits while the ask is under way: it goes ahead, and the answer names who slept", roomy, false, []in{
			{1, request(wake(0, full)), ask},
			{1, wake(100*time.Millisecond, free), "claim [a]"}, // the peer's memory left before its sleep was done
			{1, ClaimAnswer{Now: at(200 * time.Millisecond), Outcome: api.StartOutcome{Granted: true}, Asleep: true}, "sample now"},
			{1, wake(300*time.Millisecond, free), "step stepup to 0 (request)"},
			{0, slept(400*time.Millisecond, "b"), "journal room; log"},
			{0, slept(500*time.Millisecond, "b"), ""},
		}},
		{"a start that fits while the ask is under way launches, and the answer names who slept", roomy, false, []in{
			{0, start(0, 12*gib, true), "ask room on a for 7.6 GiB"},
			{0, start(100*time.Millisecond, 3*gib, true), "claim [a]"},
			{0, ClaimAnswer{Now: at(200 * time.Millisecond), Outcome: api.StartOutcome{Granted: true}, Waiting: true}, "sample now"},
			{0, start(300*time.Millisecond, 3*gib, true), "launch 0"},
			{0, Launched{Now: at(300 * time.Millisecond)}, ""},
			{0, slept(400*time.Millisecond, "b"), "journal room; log"},
		}},
		{"no room, but a peer kept out only by time may be a candidate soon: asked again then", roomy, false, []in{
			{1, request(wake(0, full)), ask},
			{1, RoomAnswer{Now: at(0), Outcome: api.RoomOutcome{GPU: "a", RetryIn: 300 * time.Millisecond}}, "journal no_room; log"},
			{1, wake(200*time.Millisecond, full), ""},
			{1, wake(300*time.Millisecond, full), ask},
			{1, RoomAnswer{Now: at(300 * time.Millisecond), Outcome: api.RoomOutcome{GPU: "a", RetryIn: time.Millisecond}}, ""},
			{1, wake(340*time.Millisecond, full), ""}, // not before RoomRetryMin
			{1, wake(350*time.Millisecond, full), ask},
			{1, RoomAnswer{Now: at(350 * time.Millisecond), Outcome: api.RoomOutcome{GPU: "a", RetryIn: time.Minute}}, ""},
			{1, wake(1349*time.Millisecond, full), ""}, // nor after RoomRetry
			{1, wake(1350*time.Millisecond, full), ask},
		}},
		{"no room: journaled once per wait, asked again every second, the wake waits", roomy, false, []in{
			{1, request(wake(0, full)), ask},
			{1, noRoom(100 * time.Millisecond), "journal no_room; log"},
			{1, wake(500*time.Millisecond, full), ""},
			{1, wake(1100*time.Millisecond, full), ask}, // a second after the answer
			{1, noRoom(1200 * time.Millisecond), ""},
			{1, wake(2200*time.Millisecond, free), "claim [a]"}, // memory freed by itself: no room event
		}},
		{"a sleep that frees too little: once the GPU's usage is flat, the next candidate", roomy, false, []in{
			{1, request(wake(0, full)), ask},
			{1, slept(100*time.Millisecond, "b"), "log; sample now"},
			{1, wake(200*time.Millisecond, full), ""},
			{1, wake(1100*time.Millisecond, full), ""},
			{1, wake(1200*time.Millisecond, full), ask},
			{1, slept(1300*time.Millisecond, "c"), "log; sample now"},
			{1, wake(1400*time.Millisecond, free), "journal room; log; claim [a]"},
		}},
		{"a slept peer's memory still leaving is waited for, up to 10 s", roomy, false, []in{
			{1, request(wake(0, full)), ask},
			{1, slept(0, "b"), "log; sample now"},
			{1, wake(time.Second, used(12*gib)), ""},
			{1, wake(4*time.Second, used(12*gib-256<<20)), ""},
			{1, wake(7*time.Second, used(12*gib-512<<20)), ""},
			{1, wake(9900*time.Millisecond, used(12*gib-768<<20)), ""},
			{1, wake(10*time.Second, used(12*gib-1024<<20)), "ask room on a for 5.6 GiB"},
		}},
		{"make_room = false: no ask, the wake waits for memory", func(p *policy.Policy) { roomy(p); p.Serve.MakeRoom = false }, false, []in{
			{1, request(wake(0, full)), ""},
			{1, wake(2*time.Second, full), ""},
		}},
		{"observe mode: no ask", roomy, true, []in{
			{1, request(wake(0, full)), ""},
		}},
		{"alone: no ask", roomy, false, []in{
			{1, Wake{Now: at(0), Request: true, Live: true, Held: true, Reading: full, Tree: map[int]bool{7: true}}, ""},
		}},
		{"no request held any more: no ask, and the wait ends", roomy, false, []in{
			{1, request(wake(0, full)), ask},
			{1, noRoom(100 * time.Millisecond), "journal no_room; log"},
			{1, Wake{Now: at(5 * time.Second), Live: true, Reading: full, Tree: map[int]bool{7: true}, Claim: claim(5 * time.Second)}, ""},
			{1, request(wake(6*time.Second, full)), ask},
			{1, noRoom(6100 * time.Millisecond), "journal no_room; log"}, // a new wait: journaled again
		}},
		{"a first start that fits nowhere asks first; no room: it waits, asking again every second", roomy, false, []in{
			{0, start(0, 12*gib, true), "ask room on a for 7.6 GiB"},
			{0, start(100*time.Millisecond, 12*gib, true), ""},
			{0, noRoom(200 * time.Millisecond), "journal no_room; log"},
			{0, start(500*time.Millisecond, 12*gib, true), "wait"},
			{0, start(1200*time.Millisecond, 12*gib, true), "ask room on a for 7.6 GiB; wait"},
		}},
		{"a start made room for claims its turn once it fits, then launches", roomy, false, []in{
			{0, start(0, 12*gib, true), "ask room on a for 7.6 GiB"},
			{0, slept(100*time.Millisecond, "b"), "log; sample now"},
			{0, start(200*time.Millisecond, 3*gib, true), "journal room; log; claim [a]"},
			{0, ClaimAnswer{Now: at(300 * time.Millisecond), Outcome: api.StartOutcome{Granted: true}, Waiting: true}, "sample now"},
			{0, start(400*time.Millisecond, 3*gib, true), "launch 0"},
		}},
		{"a first start that fits lower makes no room", nil, false, []in{
			{0, start(0, 8*gib, true), "claim [a]"},
		}},
		{"a restart makes room for the profile it aims at; no room: it starts lower", func(p *policy.Policy) {
			p.Serve.MakeRoom = true
		}, false, []in{
			{0, start(0, 8*gib, false), "ask room on a for 3.6 GiB"},
			{0, noRoom(100 * time.Millisecond), "journal no_room; log"},
			{0, start(200*time.Millisecond, 8*gib, false), "claim [a]"},
			{0, ClaimAnswer{Now: at(300 * time.Millisecond), Outcome: api.StartOutcome{Granted: true}, Waiting: true}, "sample now"},
			{0, start(400*time.Millisecond, 8*gib, false), "launch 1"},
		}},
		{"a stopped wake that does not fit waits: never a child in a serving = false profile", func(p *policy.Policy) {
			roomy(p)
			p.Profiles[1] = policy.Profile{Name: "off", NotServing: true}
		}, false, []in{
			{0, Start{Now: at(0), Devices: devs(12 * gib), Target: 0}, "wait"},
		}},
		{"when_full = lowest starts in the last serving profile", func(p *policy.Policy) {
			roomy(p)
			p.Serve.MakeRoom = false
			p.Restart.WhenFull = policy.WhenFullLowest
		}, false, []in{
			{0, Start{Now: at(0), Devices: devs(12 * gib), Target: 0}, "launch 0"},
		}},
		{"an answer to no ask is dropped", roomy, false, []in{
			{1, slept(0, "b"), ""},
			{1, noRoom(0), ""},
		}},
		{"an ask that could not be made is said once and made again", roomy, false, []in{
			{1, request(wake(0, full)), ask},
			{1, RoomAnswer{Now: at(0), Outcome: api.RoomOutcome{GPU: "a", Err: errors.New("no runtime dir")}}, "log"},
			{1, wake(time.Second, full), ask},
			{1, RoomAnswer{Now: at(time.Second), Outcome: api.RoomOutcome{GPU: "a", Err: errors.New("no runtime dir")}}, ""},
		}},
	} {
		tc.play(t)
	}
}

// TestSleepFor: another tenant's ask that this instance sleep for it is
// accepted only when it is a candidate by its own facts of the moment,
// and then it is a step to its first serving = false profile, reason
// room, for the asker; each refusal says why.
func TestSleepFor(t *testing.T) {
	idle := room.Candidate{Name: "me", Serving: true, CanSleep: true, Idle: 2 * time.Minute, UsedBytes: 10 * gib}
	ask := func(f func(*SleepFor)) SleepFor {
		s := SleepFor{Now: t0, For: "chat", GPU: "a", Priority: 0, Watches: true, Self: idle}
		if f != nil {
			f(&s)
		}
		return s
	}
	const prefix = "reply: not sleeping for chat: "
	for _, tc := range []row{
		{"an idle candidate sleeps for the asker", roomy, false, []in{
			{0, ask(nil), "reply ok; step stepdown to 1 (room) for chat"},
			{1, Sample{Now: t0.Add(time.Second), Ratio: 0.99}, ""}, // the grace after the step
		}},
		{"busy: refused", roomy, false, []in{
			{0, ask(func(s *SleepFor) { s.Self.Busy = true }), prefix + "a request is in flight or held at its door"},
		}},
		{"within keep_awake: refused", roomy, false, []in{
			{0, ask(func(s *SleepFor) { s.Self.Idle = 30 * time.Second }), prefix + "it answered or woke 30s ago, within its keep_awake 1m0s"},
		}},
		{"a higher priority than the asker's: refused", func(p *policy.Policy) { roomy(p); p.Priority = 5 }, false, []in{
			{0, ask(nil), prefix + "its priority 5 is higher than the asker's 0"},
		}},
		{"observe mode: refused", roomy, true, []in{
			{0, ask(nil), prefix + "it is in observe mode"},
		}},
		{"asleep already: refused", roomy, false, []in{
			{1, ask(nil), prefix + "it is not serving (asleep, starting or stepping)"},
		}},
		{"wake = false: refused (no request would bring it back)", func(p *policy.Policy) { roomy(p); p.Serve.Wake = false }, false, []in{
			{0, ask(nil), prefix + "it cannot sleep and be woken by a request (no serving = false profile, no front door, or wake = false)"},
		}},
		{"no serving = false profile: refused", nil, false, []in{
			{0, ask(nil), prefix + "it cannot sleep and be woken by a request (no serving = false profile, no front door, or wake = false)"},
		}},
		{"another GPU: refused", roomy, false, []in{
			{0, ask(func(s *SleepFor) { s.Watches = false }), prefix + "it does not watch GPU a"},
		}},
	} {
		tc.play(t)
	}
}

// TestRoomTexts: the figures the room and no_room events carry, and the
// sleep's detail.
func TestRoomTexts(t *testing.T) {
	pol := testPolicy()
	roomy(pol)
	g := Given{Policy: pol, Level: 1}
	full := &Reading{Devices: []Device{{Index: 0, UUID: "a", Used: 12 * gib, Total: 16 * gib}}}
	wake := func(d time.Duration, u uint64) Wake {
		r := &Reading{Devices: []Device{{Index: 0, UUID: "a", Used: u, Total: 16 * gib}}}
		return Wake{Now: t0.Add(d), Live: true, Held: true, Reading: r, Claim: Claim{Peers: true, GPUs: []string{"a"}}}
	}
	st, _ := Decide(State{}, g, Wake{Now: t0, Request: true, Live: true, Held: true, Reading: full, Claim: Claim{Peers: true}})
	st, effs := Decide(st, g, RoomAnswer{Now: t0, Outcome: api.RoomOutcome{GPU: "a", CouldFree: 3 * gib}})
	ev := effs[0].(Journal).Event
	// Not listed: the sleeper's own usage is its profile's needs, 1 GiB.
	if ev.Event != api.EventNoRoom || ev.GPU != "a" || ev.NeedBytes != 10*gib || *ev.FreeBytes != 15461882265-12*gib ||
		*ev.CouldFreeBytes != 3*gib || !strings.Contains(ev.Detail, "10 GiB needed") {
		t.Fatalf("no_room = %+v", ev)
	}
	st, _ = Decide(st, g, wake(time.Second, 12*gib))
	st, _ = Decide(st, g, RoomAnswer{Now: t0.Add(time.Second), Outcome: api.RoomOutcome{GPU: "a", Slept: "b"}})
	st, _ = Decide(st, g, wake(1500*time.Millisecond, 12*gib))
	st, _ = Decide(st, g, wake(2500*time.Millisecond, 12*gib))
	st, _ = Decide(st, g, RoomAnswer{Now: t0.Add(2500 * time.Millisecond), Outcome: api.RoomOutcome{GPU: "a", Slept: "c"}})
	_, effs = Decide(st, g, wake(4*time.Second, 3*gib))
	ev = effs[0].(Journal).Event
	if ev.Event != api.EventRoom || ev.GPU != "a" || !slices.Equal(ev.Slept, []string{"b", "c"}) || *ev.FreedBytes != 9*gib || ev.Seconds != 4 {
		t.Fatalf("room = %+v", ev)
	}
	_, effs = Decide(State{}, Given{Policy: pol, Level: 0},
		SleepFor{Now: t0, For: "chat", GPU: "a", Watches: true, Self: room.Candidate{Serving: true, CanSleep: true, Idle: 90 * time.Second}})
	if s := effs[1].(Step); s.For != "chat" || s.Why != "making room for chat on GPU a (idle 1m30s)" {
		t.Fatalf("sleep = %+v", s)
	}
}
