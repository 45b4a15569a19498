package core

import (
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/policy"
)

// TestWakeDecisions: the wake on request, one row per edge: a held
// request wakes a stopped sleep (once), never without [serve] wake, out
// of a serving profile or while stopping; a live wake waits for its
// profile to fit (the needs of what the server used while it served when
// the profile states none), then for its turn on a shared GPU, is chosen
// on a sample after the grant, and starts the rules' grace; a claim it no
// longer needs ends; `step up` wakes a stopped sleep.
func TestWakeDecisions(t *testing.T) {
	full := &Reading{Devices: []Device{{Index: 0, UUID: "a", Used: 12 * gib, Total: 16 * gib}}, ProcessesAt: t0}
	roomy := &Reading{Devices: []Device{{Index: 0, UUID: "a", Used: 4 * gib, Total: 16 * gib}}, ProcessesAt: t0}
	claim := func(due time.Duration) Claim { return Claim{Peers: true, GPUs: []string{"a"}, Due: at(due)} }
	live := func(d time.Duration, r *Reading, c Claim) Wake {
		return Wake{Now: at(d), Live: true, Reading: r, Tree: map[int]bool{}, Claim: c}
	}
	request := func(w Wake) Wake { w.Request = true; return w }
	sleepy := func(p *policy.Policy) {
		p.Serve.Wake = true
		p.Watch.Settle = time.Second
		p.Profiles[2] = policy.Profile{Name: "nap", NotServing: true, Live: true, Enter: []policy.Action{{Path: "/sleep"}}}
	}
	for _, tc := range []row{
		{"a held request wakes a stopped sleep, once", sleepy, false, []in{
			{2, Wake{Request: true, Stopped: true}, "wake stopped to 1 (request)"},
			{2, Wake{Stopped: true}, ""},
		}},
		{"no wake without [serve] wake", func(p *policy.Policy) { sleepy(p); p.Serve.Wake = false }, false, []in{
			{2, Wake{Request: true, Stopped: true}, ""},
		}},
		{"no wake out of a serving profile or while stopping", sleepy, false, []in{
			{1, Wake{Request: true, Stopped: true}, ""},
			{2, Wake{Request: true, Stopped: true, Stopping: true}, ""},
			{2, Wake{Stopped: true}, ""},
		}},
		{"a live wake waits for its profile to fit, then for its turn", sleepy, false, []in{
			{2, request(live(0, full, claim(0))), ""},
			{2, live(time.Second, roomy, claim(time.Second)), "claim [a]"},
			{2, ClaimAnswer{Now: at(1500 * time.Millisecond), Outcome: api.StartOutcome{Granted: true}, Asleep: true}, "sample now"},
			{2, live(1200*time.Millisecond, roomy, claim(1200*time.Millisecond)), "sample now"},
			{2, live(2*time.Second, roomy, claim(2*time.Second)), "step stepup to 1 (request)"},
			{1, Woke{Now: at(2 * time.Second), Taken: true}, ""},
			{1, Sample{Now: at(3 * time.Second), Ratio: 0.99}, ""}, // the grace after the wake
			{1, Settling{Now: at(3 * time.Second), Read: true, Running: true, Total: 16 * gib}, "end start: start complete: its memory has not grown for 1s"},
		}},
		{"alone, a live wake goes as soon as its profile fits, and the rules' grace starts with it", sleepy, false, []in{
			{2, request(live(0, roomy, Claim{})), "step stepup to 1 (request)"},
			{1, live(time.Second, roomy, Claim{}), ""},
			{1, Sample{Now: at(time.Second), Ratio: 0.93}, ""},
			{1, Sample{Now: at(2 * time.Second), Ratio: 0.93}, ""}, // sustain met, but within grace
			{1, Sample{Now: at(5 * time.Second), Ratio: 0.93}, "step stepdown to 2 (watermark)"},
		}},
		{"the needs of a profile that states none are what the server used while it served", func(p *policy.Policy) {
			sleepy(p)
			p.Profiles[1].Needs = 0
		}, false, []in{
			{2, Wake{Now: at(0), Request: true, Live: true, Reading: roomy, Tree: map[int]bool{}, Served: 11 * gib}, ""},
			{2, Wake{Now: at(time.Second), Live: true, Reading: roomy, Tree: map[int]bool{}, Served: 10 * gib}, "step stepup to 1 (request)"},
		}},
		{"a granted claim whose fresh sample does not fit ends", sleepy, false, []in{
			{2, request(live(0, roomy, claim(0))), "claim [a]"},
			{2, ClaimAnswer{Now: at(time.Second), Outcome: api.StartOutcome{Granted: true}, Asleep: true}, "sample now"},
			{2, live(2*time.Second, full, claim(2*time.Second)), "end start"},
		}},
		{"a live wake not taken ends its claim", sleepy, false, []in{
			{2, request(live(0, roomy, claim(0))), "claim [a]"},
			{2, ClaimAnswer{Now: at(time.Second), Outcome: api.StartOutcome{Granted: true}, Asleep: true}, "sample now"},
			{2, live(2*time.Second, roomy, claim(2*time.Second)), "step stepup to 1 (request)"},
			{2, Woke{Now: at(2 * time.Second)}, "end start"},
		}},
		{"a wish with nothing left to wake into ends, and its claim with it", sleepy, false, []in{
			{2, request(live(0, roomy, claim(0))), "claim [a]"},
			{2, ClaimAnswer{Now: at(time.Second), Outcome: api.StartOutcome{Granted: true}, Asleep: true}, "sample now"},
			{1, live(2*time.Second, roomy, claim(2*time.Second)), "end start"}, // woken by something else
			{2, live(3*time.Second, roomy, claim(3*time.Second)), ""},
		}},
		{"a claim answer for a wake no longer wanted ends it", sleepy, false, []in{
			{2, request(live(0, roomy, claim(0))), "claim [a]"},
			{2, Wake{Stopped: true}, "wake stopped to 1 (request)"}, // the child ended meanwhile
			{2, ClaimAnswer{Now: at(time.Second), Outcome: api.StartOutcome{Granted: true}, Asleep: true}, "end start"},
		}},
		{"`step up` wakes a stopped sleep", sleepy, false, []in{
			{2, ManualStep{Now: at(0), Up: true, Stopped: true}, "wake stopped to 1 (manual) manual"},
		}},
	} {
		tc.play(t)
	}
}

// TestSleepTexts: the details the sleep rules' effects carry.
func TestSleepTexts(t *testing.T) {
	pol := testPolicy()
	pol.Serve.Idle = time.Minute
	pol.Profiles[2].NotServing = true
	g := Given{Policy: pol}
	_, effs := Decide(State{}, g, IdleCheck{Now: t0.Add(time.Minute), Since: t0, Ready: true})
	if s, ok := effs[0].(Step); !ok || s.Why != "no request for 1m0s" || s.Reason != api.ReasonIdle {
		t.Fatalf("idle step %+v", effs)
	}
	st, _ := Decide(State{}, g, PeerNobody{Now: t0, Ratio: 0.93})
	_, effs = Decide(st, g, PeerNobody{Now: t0.Add(time.Second), Ratio: 0.98, GPU: "a", Shared: true})
	j, ok := effs[0].(Journal)
	if !ok || j.Event.GPU != "a" || j.Event.Detail != "watermark 0.98 >= critical 0.97 and no tenant of shared GPU a can step lower" {
		t.Fatalf("shared alarm %+v", effs)
	}
	_, effs = Decide(State{}, g, PeerNobody{Now: t0, Ratio: 0.98})
	if j, ok := effs[0].(Journal); !ok || j.Event.Detail != "watermark 0.98 >= critical 0.97 at the last profile; nothing lower to step to" {
		t.Fatalf("own alarm %+v", effs)
	}
}

// TestWakeRules: which profile a wake goes to, which sleep stops the
// child, and where an idle server sleeps.
func TestWakeRules(t *testing.T) {
	ps := []policy.Profile{{Name: "full"}, {Name: "half"}, {Name: "nap", NotServing: true, Live: true, Enter: []policy.Action{{Path: "/sleep"}}},
		{Name: "off", NotServing: true, Live: true}, {Name: "gone", NotServing: true}}
	for _, tc := range []struct {
		level, wake int
		stops       bool
	}{{0, -1, false}, {1, -1, false}, {2, 1, false}, {3, 1, true}, {4, 1, true}} {
		if got := WakeTo(ps, tc.level); got != tc.wake {
			t.Errorf("WakeTo(%d) = %d, want %d", tc.level, got, tc.wake)
		}
		if got := StopsToSleep(ps[tc.level]); got != tc.stops {
			t.Errorf("StopsToSleep(%s) = %v, want %v", ps[tc.level].Name, got, tc.stops)
		}
	}
	if FirstAsleep(ps) != 2 || FirstAsleep(ps[:2]) != -1 || NearestServing(ps[2:], 2) != -1 {
		t.Fatalf("FirstAsleep %d/%d, NearestServing %d", FirstAsleep(ps), FirstAsleep(ps[:2]), NearestServing(ps[2:], 2))
	}
}
