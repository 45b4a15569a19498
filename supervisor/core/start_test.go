package core

import (
	"errors"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/policy"
)

// TestStartRules: the start rules and the one start at a time, one row
// per edge: a start without a reading, the wait for the dead child's
// memory (up to release_timeout), a gpu_fault restart's wait for the GPU,
// the claim on a shared GPU (asked, refused and waited for, failed and
// gone ahead, no longer wanted, chosen on a sample after the grant, none
// while nothing fits under when_full = "wait", none alone or with no GPU
// known) and the end of a start (settled, 10 x settle, ready, the exit),
// the run's beginning, and a start that cannot run.
func TestStartRules(t *testing.T) {
	free := func(used uint64) []Device { return []Device{{Index: 0, UUID: "a", Used: used, Total: 16 * gib}} }
	claim := func(due time.Duration) Claim { return Claim{Peers: true, GPUs: []string{"a"}, Due: at(due)} }
	start := func(due time.Duration) Start {
		return Start{Now: at(due), Devices: free(0), Target: 0, Claim: claim(due)}
	}
	granted := func(d time.Duration) ClaimAnswer {
		return ClaimAnswer{Now: at(d), Outcome: api.StartOutcome{Granted: true}, Waiting: true}
	}
	settle := func(p *policy.Policy) { p.Watch.Settle = 2 * time.Second }
	lost := errors.New("GPU lost")
	for _, tc := range []row{
		{"without a reading a start goes where it aimed, once any release wait is over", nil, false, []in{
			{0, Start{Now: at(0), Target: 1, Err: lost, Release: true, Waited: time.Second}, ""},
			{0, Start{Now: at(5 * time.Second), Target: 1, Err: lost, Release: true, Waited: 5 * time.Second}, "launch 1"},
			{0, Start{Target: 0, Err: lost}, "launch 0"},
		}},
		{"the dead child's memory is waited for up to release_timeout", nil, false, []in{
			{0, Start{Devices: free(0), Release: true, Alive: true, Waited: time.Second}, ""},
			{0, Start{Devices: free(0), Release: true, Waited: time.Second}, "released; launch 0"},
			{0, Start{Devices: free(0), Release: true, Alive: true, Waited: 5 * time.Second}, "log; released; launch 0"},
		}},
		{"a gpu_fault restart waits for the faulted GPU to answer, said once", func(p *policy.Policy) {
			p.Restart.OnGPUFault = policy.OnGPUFaultRestart
		}, false, []in{
			{1, Exited{Now: at(0), Ran: time.Second, Fault: &Fault{UUID: "a"}}, "count gpu_fault to 1; log; relaunch 1 after 1s"},
			{1, Start{Devices: free(0), Target: 1, Faulted: true}, "log"},
			{1, Start{Target: 1, Err: lost}, ""},
			{1, Start{Devices: free(0), Target: 1}, "launch 1"},
			{1, Start{Devices: free(0), Target: 1, Faulted: true}, "launch 1"}, // the wait is over
		}},
		{"one start at a time: claimed, then chosen on a sample taken after the grant", settle, false, []in{
			{0, start(0), "claim [a]"},
			{0, start(100 * time.Millisecond), ""}, // the claim is with the tenants
			{0, granted(200 * time.Millisecond), "sample now"},
			{0, start(150 * time.Millisecond), "sample now"}, // due before the grant
			{0, start(300 * time.Millisecond), "launch 0"},
			{0, Launched{Now: at(300 * time.Millisecond)}, ""},
			{0, Settling{Now: at(time.Second), Read: true, Running: true, Used: 8 * gib, Total: 16 * gib}, ""},
			{0, Settling{Now: at(2 * time.Second), Read: true, Running: true, Used: 8 * gib, Total: 16 * gib}, ""},
			{0, Settling{Now: at(3 * time.Second), Read: true, Running: true, Used: 8 * gib, Total: 16 * gib}, "end start: start complete: its memory has not grown for 2s"},
			{0, Settling{Now: at(4 * time.Second), Read: true, Running: true}, ""},
		}},
		{"a refused claim waits for the tenant that is starting, said once per tenant", nil, false, []in{
			{0, start(0), "claim [a]"},
			{0, ClaimAnswer{Outcome: api.StartOutcome{Holder: "b", GPU: "a"}, Waiting: true}, "end start; log"},
			{0, start(time.Second), "claim [a]"},
			{0, ClaimAnswer{Outcome: api.StartOutcome{Holder: "b", GPU: "a"}, Waiting: true}, "end start"},
			{0, start(2 * time.Second), "claim [a]"},
			{0, ClaimAnswer{Now: at(2 * time.Second), Outcome: api.StartOutcome{Err: errors.New("x"), GPU: "a"}, Waiting: true}, "log; sample now"},
			{0, start(3 * time.Second), "launch 0"},
		}},
		{"a claim no longer wanted ends; an answer to no claim is dropped", nil, false, []in{
			{0, start(0), "claim [a]"},
			{0, ClaimAnswer{Outcome: api.StartOutcome{Granted: true}}, "end start"},
			{0, granted(time.Second), ""},
			{0, start(time.Second), "claim [a]"},
			{0, ClaimAnswer{Outcome: api.StartOutcome{Granted: true}, Waiting: true, Stopping: true}, "end start"},
		}},
		{"when_full = wait claims nothing while no profile fits", func(p *policy.Policy) { p.Profiles[2].Needs = 4 * gib }, false, []in{
			{0, Start{Devices: free(13 * gib), Claim: claim(0)}, "wait"},
			{0, Start{Devices: free(0), Claim: claim(time.Second)}, "claim [a]"},
		}},
		{"alone, or with no GPU known, nothing is claimed", nil, false, []in{
			{0, Start{Devices: free(0), Claim: Claim{GPUs: []string{"a"}}}, "launch 0"},
			{0, Start{Devices: free(0), Claim: Claim{Peers: true}}, "launch 0"},
		}},
		{"a start ends 10 x settle after its launch, measured or not", settle, false, []in{
			{0, start(0), "claim [a]"},
			{0, granted(0), "sample now"},
			{0, start(time.Second), "launch 0"},
			{0, Launched{Now: at(time.Second)}, ""},
			{0, Settling{Now: at(20 * time.Second), Running: true}, ""},
			{0, Settling{Now: at(21 * time.Second), Running: true}, "end start: start complete: 10 x settle (20s) passed"},
		}},
		{"a start ends when the child is ready, and at its exit without a word", settle, false, []in{
			{0, start(0), "claim [a]"},
			{0, granted(0), "sample now"},
			{0, start(time.Second), "launch 0"},
			{0, Launched{Now: at(time.Second)}, ""},
			{0, Ready{Why: "the child said ready"}, "end start: start complete: the child said ready"},
			{0, Ready{Why: "again"}, ""},
			{0, start(2 * time.Second), "claim [a]"},
			{0, granted(2 * time.Second), "sample now"},
			{0, start(3 * time.Second), "launch 0"},
			{0, Launched{Now: at(3 * time.Second)}, ""},
			{0, Exited{Now: at(4 * time.Second), Exit: Exit{Code: 1}, Ran: time.Second}, "end start; count crash to 0; log; relaunch 0 after 1s"},
		}},
		{"a launch with no claim granted ends the claim asked", nil, false, []in{
			{0, start(0), "claim [a]"},
			{0, Launched{Now: at(time.Second)}, "end start"},
		}},
		{"the run begins waiting for its start, or asleep where the start level serves nothing", func(p *policy.Policy) {
			p.Profiles[2].NotServing = true
		}, false, []in{
			{0, Begin{}, "relaunch 0 after 0s"},
			{2, Begin{}, "stay asleep: start: asleep in profile int4"},
		}},
		{"a start that cannot run ends the run: 1, or 78 for a command that cannot be expanded", nil, false, []in{
			{0, Unstartable{Err: errors.New("server: not found")}, "journal giveup; finish fatal 3/0"},
			{0, Unstartable{Err: errors.New("${X}: unset"), Expand: true}, "finish fatal 5/0"},
		}},
	} {
		tc.play(t)
	}
}

func TestSettleTracker(t *testing.T) {
	const total = 16 * gib // 1% is 164 MiB: above the 64 MiB floor
	type reading struct {
		at   time.Duration
		used uint64
		want bool
	}
	for _, tc := range []struct {
		name     string
		baseline uint64
		total    uint64
		readings []reading
	}{
		{"flat from the launch", 0, total, []reading{{time.Second, 0, false}, {5 * time.Second, 0, true}}},
		{"growth restarts the wait", 0, total, []reading{
			{time.Second, 4 * gib, false}, {3 * time.Second, 8 * gib, false}, {7 * time.Second, 8 * gib, false}, {8 * time.Second, 8 * gib, true}}},
		{"wobble within 1% is flat", 0, total, []reading{
			{time.Second, 4 * gib, false}, {2 * time.Second, 4*gib + 100*mib, false}, {6 * time.Second, 4*gib + 150*mib, true}}},
		{"creeping growth counts once it passes the tolerance", 0, total, []reading{
			{time.Second, 4 * gib, false}, {2 * time.Second, 4*gib + 100*mib, false}, {4 * time.Second, 4*gib + 200*mib, false},
			{8 * time.Second, 4*gib + 200*mib, false}, {9 * time.Second, 4*gib + 200*mib, true}}},
		{"on a small GPU the 64 MiB floor applies", 0, 2 * gib, []reading{
			{time.Second, 60 * mib, false}, {5 * time.Second, 60 * mib, true}}},
		{"shrinking is not growth", 0, total, []reading{
			{time.Second, 4 * gib, false}, {3 * time.Second, 2 * gib, false}, {6 * time.Second, 2 * gib, true}}},
		{"device usage: the other tenants' memory is the baseline", 10 * gib, total, []reading{
			{time.Second, 10 * gib, false}, {5 * time.Second, 10 * gib, true}}},
		{"device usage: growth above it counts", 10 * gib, total, []reading{
			{time.Second, 11 * gib, false}, {5 * time.Second, 11 * gib, false}, {6 * time.Second, 11 * gib, true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			launch := time.Unix(1000, 0)
			s := newSettleTracker(launch, 5*time.Second, tc.baseline)
			for i, r := range tc.readings {
				if got := s.observe(launch.Add(r.at), r.used, tc.total); got != r.want {
					t.Fatalf("reading %d (%v, %d MiB): settled %v, want %v", i, r.at, r.used/mib, got, r.want)
				}
			}
		})
	}
}
