package supervisor

import (
	"fmt"
	"syscall"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/policy"
	"github.com/gpuguard/gpuguard/supervisor/core"
)

// A serving = false profile entered without live actions (live = false,
// or no enter: core.StopsToSleep) is slept in by stopping the child: its
// memory is free, child_pid is 0, and nothing restarts it until the
// instance leaves the profile. Any server, even one with no admin API
// (TGI), can share a GPU on demand this way.
//
// The sleeper (below, and wake.go) owns sleeping and waking. It holds
// its own state (a held request's wish to wake, when the server became
// able to answer, what it used while it served); the lifecycle's fields
// it reads and moves are lent to it for each call (sleepView), and what
// it asks of the lifecycle goes through lifeVerbs.

// sleeper is the loop's side of sleeping and waking.
type sleeper struct {
	want bool // a held request asked for a wake not yet begun
	// awake is when the server last became able to serve (its first
	// healthy answer, or a wake by a live change), for the idle rule.
	awake time.Time
	// served is what the child's processes used at the newest sample while
	// it served (0: not known), the needs of a wake into a serving profile
	// that states none (core.WakeFit).
	served uint64
}

// lifeVerbs is what a sleep or a wake asks of the child's lifecycle; the
// loop implements it.
type lifeVerbs interface {
	coreFeed // the journal, and the decision core (an idle sleep is its step)
	emitStep(event string, to int, reason, why string)
	stopChild(sig syscall.Signal)
	writeState(why string) (api.ProfileState, error)
	publish(st api.ProfileState)
	publishSnapshot()
	enterWaiting(level int, release map[int]bool)
	changeProfile(level int, reason, why string, reply chan response) bool
}

// sleepView is the lifecycle as a sleep or a wake sees it, lent for one
// call: the fields it moves or reads as they change (pointers), the
// newest reading, and the verbs it acts through.
type sleepView struct {
	do  lifeVerbs
	pol *policy.Policy
	// moved by a sleep or a wake
	plan          **restartPlan
	state         *string
	level, target *int
	rules         *core.Rules // the decision core's: a wake starts their grace
	claim         *startClaim // a live wake claims as a start does
	// read as they are at each step of the call
	child              *Child
	stopping, finished *bool
	acts               *actionState
	door               *doorLink // nil: no front door
	// the newest reading (have: good, and the probe is up) and the child's
	// processes in it; claims, to make a claim with
	sample      gpu.Sample
	have        bool
	tree        map[int]bool
	childStart  time.Time
	lastRequest time.Time
	claims      claimCtx
}

// sleepView lends the loop's lifecycle to the sleeper for one call.
func (l *loop) sleepView() sleepView {
	do := lifeOps{loopVerbs: loopFeed{&l.out, l}, pol: l.pol, level: &l.level, ratio: l.latest.ratio, life: &l.life, file: &l.stateFile, out: &l.out, door: &l.door}
	v := sleepView{do: do, pol: l.pol, plan: &l.life.plan, state: &l.life.state, level: &l.level, target: &l.life.wait.target,
		rules: &l.core.Rules, claim: &l.shared.startClaim, child: &l.life.run.child, stopping: &l.life.stop.stopping, finished: &l.life.end.finished,
		acts: &l.acts, sample: l.latest.lastSample, have: l.latest.haveSample && !l.health.down(), tree: l.life.run.childTree,
		childStart: l.life.run.childStart, lastRequest: time.Unix(0, l.s.lastRequest.Load()), claims: l.claims()}
	if l.deps.Door != nil {
		v.door = &l.door
	}
	return v
}

// stoppedAsleep reports an instance asleep with its child stopped.
func (v sleepView) stoppedAsleep() bool { return *v.child == nil && *v.state == api.StateAsleep }

// profile is the profile at level.
func (v sleepView) profile(level int) policy.Profile { return v.pol.Profiles[level] }

// begin stops the child so that the instance sleeps in level: the exit
// ends in fellAsleep, not in a restart.
func (z *sleeper) begin(v sleepView, level int, reason string, reply chan response) {
	plan := &restartPlan{level: level, reason: reason, from: v.profile(*v.level).Name, sleep: true}
	if reply != nil {
		plan.replies = append(plan.replies, reply)
	}
	*v.plan = plan
	*v.state = api.StateStepping
	v.do.logf("stopping the child to sleep in profile %s (%s)", v.profile(level).Name, reason)
	v.do.stopChild(v.pol.Restart.StopSignal)
}

// fellAsleep handles the exit of a child stopped to sleep: the instance
// is now asleep in the plan's profile, with no child.
func (z *sleeper) fellAsleep(v sleepView) bool {
	plan := *v.plan
	if plan == nil || !plan.sleep {
		return false
	}
	*v.plan = nil
	name := v.profile(plan.level).Name
	z.asleepNoChild(v, plan.level, fmt.Sprintf("asleep in profile %s (%s): the child is stopped", name, plan.reason))
	if len(plan.replies) > 0 {
		v.do.publishSnapshot()
	}
	for _, r := range plan.replies {
		r <- response{profile: name}
	}
	return true
}

// asleepNoChild makes the instance asleep in level with no child, the
// state file saying why: it stays so until it leaves the profile
// (wakeStopped), through the normal start path.
func (z *sleeper) asleepNoChild(v sleepView, level int, why string) {
	*v.level, *v.target = level, level
	*v.state = api.StateAsleep
	writeAndPublish(v, why)
	v.do.logf("asleep in profile %s: no child runs until the instance leaves it", v.profile(level).Name)
}

// writeAndPublish writes the state file (why) and publishes what it
// says; a failed write is logged.
func writeAndPublish(v sleepView, why string) {
	st, err := v.do.writeState(why)
	if err != nil {
		v.do.logf("%v", err)
		return
	}
	v.do.publish(st)
}

// startAsleep begins the run asleep, with no child, when the start level
// serves nothing: a child started there would serve against its profile.
func (z *sleeper) startAsleep(v sleepView) bool {
	if v.profile(*v.target).Serving() {
		return false
	}
	z.asleepNoChild(v, *v.target, "start: asleep in profile "+v.profile(*v.target).Name)
	return true
}

// wakeStopped leaves a stopped sleep for level (above the current one):
// into another serving = false profile by a change of the state file
// alone, else by starting the child again, as soon as level fits. reply,
// if any, gets the profile at the start.
func (z *sleeper) wakeStopped(v sleepView, level int, reason, why string, reply chan response) {
	v.do.emitStep(api.EventStepUp, level, reason, why)
	name := v.profile(level).Name
	if !v.profile(level).Serving() {
		*v.level, *v.target = level, level
		writeAndPublish(v, why)
		if reply != nil {
			v.do.publishSnapshot()
			reply <- response{profile: name}
		}
		return
	}
	plan := &restartPlan{level: level, reason: reason, from: v.profile(*v.level).Name}
	if reply != nil {
		plan.replies = append(plan.replies, reply)
	}
	*v.plan = plan
	v.do.logf("waking: starting the child in profile %s (%s)", name, why)
	*v.level = level
	v.do.enterWaiting(level, nil)
}

// manualWake is `step up` while the child is stopped asleep.
func (z *sleeper) manualWake(v sleepView, r request) bool {
	if !v.stoppedAsleep() || !r.up || *v.level == 0 {
		return false
	}
	z.wakeStopped(v, *v.level-1, api.ReasonManual, "manual step up", r.reply)
	return true
}

// lifeOps are the sleeper's verbs (lifeVerbs): the loop's feed of the
// core, its snapshot and its changes of profile, and the rest one step
// on the room that owns it.
type lifeOps struct {
	loopVerbs
	pol   *policy.Policy
	level *int // read at each call: a sleep moves it before it writes
	ratio float64
	life  *lifecycle
	file  *stateFile
	out   *reporter
	door  *doorLink
}

// loopVerbs is what only the loop can do for the sleeper.
type loopVerbs interface {
	coreFeed
	publishSnapshot()
	changeProfile(level int, reason, why string, reply chan response) bool
}

func (o lifeOps) emitStep(event string, to int, reason, why string) {
	o.emit(stepEvent(o.pol, *o.level, o.ratio, event, to, reason, why))
}

func (o lifeOps) stopChild(sig syscall.Signal) {
	o.door.stop(o.life.run.child, sig, o.pol.Restart.StopTimeout, &o.life.stop.stopWait)
}

func (o lifeOps) writeState(why string) (api.ProfileState, error) {
	return o.file.writeAt(o.pol.Profiles[*o.level], *o.level, why)
}

func (o lifeOps) publish(st api.ProfileState) { o.out.publish(st) }

func (o lifeOps) enterWaiting(level int, release map[int]bool) { o.life.enterWaiting(level, release) }
