package supervisor

import (
	"fmt"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/policy"
	"github.com/gpuguard/gpuguard/supervisor/core"
)

// The sleeper on its own, without a loop: a lifecycle lent to it as a
// sleepView over plain variables, and verbs that record what it asks.

type fakeVerbs struct {
	ops    []string
	inputs []core.Input
}

func (f *fakeVerbs) emit(ev api.Event)               { f.ops = append(f.ops, "emit "+ev.Event) }
func (f *fakeVerbs) logf(format string, args ...any) { f.ops = append(f.ops, "log") }
func (f *fakeVerbs) stopChild(sig syscall.Signal)    { f.ops = append(f.ops, fmt.Sprintf("stop %d", sig)) }
func (f *fakeVerbs) publish(st api.ProfileState)     { f.ops = append(f.ops, "publish "+st.Reason) }
func (f *fakeVerbs) publishSnapshot()                { f.ops = append(f.ops, "snapshot") }
func (f *fakeVerbs) enterWaiting(level int, _ map[int]bool) {
	f.ops = append(f.ops, fmt.Sprintf("wait %d", level))
}
func (f *fakeVerbs) doAll(effs []core.Effect, _ chan response) {
	for _, e := range effs {
		f.ops = append(f.ops, fmt.Sprintf("%T", e))
	}
}
func (f *fakeVerbs) emitStep(event string, to int, reason, why string) {
	f.ops = append(f.ops, fmt.Sprintf("step %s %d %s", event, to, reason))
}
func (f *fakeVerbs) writeState(why string) (api.ProfileState, error) {
	f.ops = append(f.ops, "write")
	return api.ProfileState{Reason: why}, nil
}
func (f *fakeVerbs) changeProfile(level int, reason, why string, _ chan response) bool {
	f.ops = append(f.ops, fmt.Sprintf("change %d %s", level, reason))
	return true
}
func (f *fakeVerbs) decide(in core.Input) []core.Effect {
	f.inputs = append(f.inputs, in)
	return nil
}

// lent is a lifecycle for the sleeper: a child runs at level in state.
type lent struct {
	pol                *policy.Policy
	plan               *restartPlan
	state              string
	level, target      int
	rules              core.Rules
	claim              startClaim
	child              Child
	stopping, finished bool
	acts               actionState
	door               doorLink
}

func (x *lent) view(do lifeVerbs) sleepView {
	if x.claim.starting == nil {
		x.claim.starting = new(atomic.Bool) // the supervisor's flag
	}
	return sleepView{do: do, pol: x.pol, plan: &x.plan, state: &x.state, level: &x.level, target: &x.target,
		rules: &x.rules, claim: &x.claim, child: &x.child, stopping: &x.stopping, finished: &x.finished,
		acts: &x.acts, door: &x.door, tree: map[int]bool{}}
}

func sleepyPolicy() *policy.Policy {
	pol := testPolicy()
	pol.Serve.Wake, pol.Serve.Idle = true, time.Minute
	pol.Profiles[2] = policy.Profile{Name: "asleep", NotServing: true}
	return pol
}

func TestSleeperStopsAndWakes(t *testing.T) {
	var z sleeper
	f := &fakeVerbs{}
	x := &lent{pol: sleepyPolicy(), state: api.StateRunning, child: &fakeChild{pid: 7, done: make(chan struct{})}}
	if !core.StopsToSleep(x.pol.Profiles[2]) {
		t.Fatal("a serving = false profile without live actions is not slept in by a stop")
	}
	z.begin(x.view(f), 2, api.ReasonIdle, nil)
	if x.plan == nil || !x.plan.sleep || x.plan.from != "fp16" || x.state != api.StateStepping {
		t.Fatalf("plan %+v, state %s", x.plan, x.state)
	}
	if want := []string{"log", "stop 15"}; !slices.Equal(f.ops, want) {
		t.Fatalf("ops %q, want %q", f.ops, want)
	}
	f.ops, x.child = nil, nil // the child exits
	if !z.fellAsleep(x.view(f)) || x.plan != nil || x.state != api.StateAsleep || x.level != 2 || x.target != 2 {
		t.Fatalf("not asleep: plan %+v, state %s, level %d/%d", x.plan, x.state, x.level, x.target)
	}
	if want := []string{"write", "publish asleep in profile asleep (idle): the child is stopped", "log"}; !slices.Equal(f.ops, want) {
		t.Fatalf("ops %q, want %q", f.ops, want)
	}
	// A held request wakes the stopped sleep: the child starts again in
	// the nearest serving profile.
	f.ops = nil
	z.onWanted(x.view(f))
	if z.want || x.plan == nil || x.plan.level != 1 || x.level != 1 {
		t.Fatalf("no wake: want %v, plan %+v, level %d", z.want, x.plan, x.level)
	}
	if want := []string{"step stepup 1 request", "log", "wait 1"}; !slices.Equal(f.ops, want) {
		t.Fatalf("ops %q, want %q", f.ops, want)
	}
}

func TestSleeperWakesLiveAndIdles(t *testing.T) {
	var z sleeper
	f := &fakeVerbs{}
	pol := sleepyPolicy()
	pol.Profiles[2].Live, pol.Profiles[2].Enter = true, []policy.Action{{Method: "POST", Path: "/sleep"}}
	x := &lent{pol: pol, state: api.StateAsleep, level: 2, child: &fakeChild{pid: 7, done: make(chan struct{})}}
	if core.StopsToSleep(pol.Profiles[2]) {
		t.Fatal("a live sleep stopped the child")
	}
	// No coordinator: nothing to claim, so a live wake goes at once, and
	// the rules' grace starts with it.
	z.onWanted(x.view(f))
	if want := []string{"change 1 request"}; z.want || !slices.Equal(f.ops, want) || x.rules == (core.Rules{}) {
		t.Fatalf("ops %q, want %q (want %v)", f.ops, want, z.want)
	}
	// The idle rule counts from the newest of the start, the wake and the
	// last request, and only once the door saw the child healthy.
	t0 := time.Unix(1_000_000, 0)
	x.level, x.state, f.ops = 0, api.StateRunning, nil
	v := x.view(f)
	v.childStart, v.lastRequest, z.awake = t0, t0.Add(2*time.Second), t0.Add(time.Second)
	z.checkIdle(v, t0.Add(time.Hour))
	x.door.healthy = true
	z.checkIdle(v, t0.Add(time.Hour))
	want := []core.Input{core.IdleCheck{Now: t0.Add(time.Hour), Since: t0.Add(2 * time.Second)},
		core.IdleCheck{Now: t0.Add(time.Hour), Since: t0.Add(2 * time.Second), Ready: true}}
	if !slices.Equal(f.inputs, want) {
		t.Fatalf("inputs %+v, want %+v", f.inputs, want)
	}
}
