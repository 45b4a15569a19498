package supervisor

import (
	"context"
	"syscall"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// Door is the front door in front of the child (package serve), as the
// supervisor sees it: the supervisor says when a child was launched, when
// it is gone or about to be stopped, which profile answers and whether
// memory is short; it asks the door to drain before every stop it starts
// itself. The door reports a launch's first healthy answer through
// Supervisor.Healthy. Every method must return at once (the loop calls
// them); a nil Door is valid (no front door).
type Door interface {
	// Launched: launch number gen has started; poll its health and let
	// requests through from its first 2xx.
	Launched(gen int)
	// Unready: the child exited; hold new requests until the next launch
	// is healthy.
	Unready()
	// Drain holds new requests and returns a channel closed once every
	// request passed to the child has finished.
	Drain() <-chan struct{}
	// Profile is the profile answers carry.
	Profile(name string, level, levels int)
	// Short: memory is short (a step down is pending, or the watermark is
	// at or above high).
	Short(short bool)
	// Ready and Held are the status object's ready and held.
	Ready() bool
	Held() int
}

// doorState is the loop's side of the front door.
type doorState struct {
	drain <-chan struct{} // non-nil while a drain runs before a stop
	limit timer           // the drain's bound, stop_timeout
	sig   syscall.Signal  // sent once the drain ends
	// healthy: the current child has answered its health check;
	// notified: systemd has READY=1.
	healthy, notified bool
}

// Healthy is the door's report that launch gen answered its health check
// for the first time: the child is ready. A report for an older launch is
// ignored.
func (s *Supervisor) Healthy(gen int) {
	_ = s.send(context.Background(), request{op: opHealthy, gen: gen})
}

// onHealthy journals the child's readiness and lets what waited for it go
// on: the next tenant's start on a shared GPU, and systemd's READY=1.
func (l *loop) onHealthy(gen int) {
	if gen != l.starts || l.child == nil || l.door.healthy || l.stopping {
		return
	}
	l.door.healthy = true
	l.wake.awake = time.Now() // the idle rule counts from here
	after := time.Since(l.childStart)
	l.emit(api.Event{Event: api.EventReady, PID: l.child.PID(), AfterSeconds: after.Seconds()})
	l.deps.Logf("the child answered its health check %s after its start: ready", after.Round(time.Millisecond))
	l.shared.endStarting("it answered its health check")
	if n := l.deps.Notifier; n != nil && !l.door.notified {
		l.door.notified = true
		_ = n.Ready()
	}
}

// readyAtLaunch reports whether READY=1 goes out at the first launch:
// without a front door; with one, at the first healthy answer.
func (l *loop) readyAtLaunch() bool { return l.deps.Door == nil }

// doorLaunched follows a launch.
func (l *loop) doorLaunched() {
	l.door.healthy = false
	if l.deps.Door != nil {
		l.deps.Door.Launched(l.starts)
	}
}

// doorExited follows the child's exit: a drain under way has nothing left
// to wait for.
func (l *loop) doorExited() {
	l.door.drain = nil
	l.door.limit.stop()
	l.door.healthy = false
	if l.deps.Door != nil {
		l.deps.Door.Unready()
	}
}

// stopChild sends sig to the child to stop it, as gpuguard's own stops do
// (a planned restart, a stop, a lost GPU), then arms the SIGKILL timer.
// With a front door it first drains: new requests are held and those in
// flight finish, for up to stop_timeout. A stop asked for while a drain
// runs changes the signal the drain ends with.
func (l *loop) stopChild(sig syscall.Signal) {
	if l.child == nil {
		return
	}
	if l.deps.Door == nil {
		_ = l.child.Signal(sig)
		l.stopWait.arm(l.pol.Restart.StopTimeout)
		return
	}
	l.door.sig = sig
	if l.door.drain != nil {
		return
	}
	l.door.healthy = false
	l.door.drain = l.deps.Door.Drain()
	l.door.limit.arm(l.pol.Restart.StopTimeout)
}

// drained ends a drain (all requests finished, or stop_timeout passed) by
// sending the stop signal.
func (l *loop) drained(timedOut bool) {
	l.door.drain = nil
	l.door.limit.stop()
	if timedOut {
		l.deps.Logf("requests still in flight after stop_timeout (%s); stopping the child anyway", l.pol.Restart.StopTimeout)
	}
	if l.child == nil {
		return
	}
	_ = l.child.Signal(l.door.sig)
	l.stopWait.arm(l.pol.Restart.StopTimeout)
}

// doorSync tells the door the profile and whether memory is short, after
// every event of the loop.
func (l *loop) doorSync() {
	d := l.deps.Door
	if d == nil {
		return
	}
	d.Profile(l.pol.Profiles[l.level].Name, l.level, len(l.pol.Profiles))
	short := l.rules.stepPending() || l.plan != nil || l.haveSample && l.ratio >= l.pol.Watermark.High
	l.s.short.Store(short)
	d.Short(short)
}

// doorStatus fills the status object's ready and held: the door's view,
// or without one whether a child runs.
func (s *Supervisor) doorStatus(st *api.Status) {
	if d := s.deps.Door; d != nil {
		st.Ready, st.Held = d.Ready(), d.Held()
		return
	}
	st.Ready = st.ChildPID != 0
}
