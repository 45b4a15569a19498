package supervisor

import (
	"context"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/supervisor/core"
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
	// InFlight is how many requests were passed to the child and are not
	// answered whole yet; LastAnswer when the last of them ended (zero:
	// none yet). [serve] idle and keep_awake count from them.
	InFlight() int
	LastAnswer() time.Time
}

// doorLink is the loop's side of the front door: it says what the
// loop did to the child (launched, exited, stopping) and holds a drain
// under way until the requests in flight finish. d is nil without a
// front door, and then every stop signals at once.
type doorLink struct {
	d     Door
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
	_ = s.port.send(context.Background(), request{op: opHealthy, gen: gen})
}

// onHealthy journals the child's readiness and lets what waited for it go
// on: the next tenant's start on a shared GPU, and systemd's READY=1.
func (l *loop) onHealthy(gen int) {
	if gen != l.life.hist.starts || l.life.run.child == nil || l.life.door.healthy || l.life.stop.stopping {
		return
	}
	l.life.door.healthy = true
	l.s.act.woke(time.Now()) // the idle rule counts from here
	after := time.Since(l.life.run.childStart)
	l.out.Emit(api.Event{Event: api.EventReady, PID: l.life.run.child.PID(), AfterSeconds: after.Seconds()})
	l.deps.Logf("the child answered its health check %s after its start: ready", after.Round(time.Millisecond))
	l.feed(core.Ready{Why: "it answered its health check"}, nil)
	if n := l.deps.Notifier; n != nil && !l.life.door.notified {
		l.life.door.notified = true
		_ = n.Ready()
	}
}

// readyAtLaunch reports whether READY=1 goes out at the first launch:
// without a front door; with one, at the first healthy answer.
func (k *doorLink) readyAtLaunch() bool { return k.d == nil }

// launched follows launch number gen.
func (k *doorLink) launched(gen int) {
	k.healthy = false
	if k.d != nil {
		k.d.Launched(gen)
	}
}

// exited follows the child's exit: a drain under way has nothing left to
// wait for.
func (k *doorLink) exited() {
	k.drain = nil
	k.limit.stop()
	k.healthy = false
	if k.d != nil {
		k.d.Unready()
	}
}

// stop sends sig to child to stop it, as gpuguard's own stops do (a
// planned restart, a stop, a lost GPU), then arms kill, the SIGKILL timer,
// for timeout. With a front door it first drains: new requests are held
// and those in flight finish, for up to timeout. A stop asked for while a
// drain runs changes the signal the drain ends with.
func (k *doorLink) stop(child Child, sig syscall.Signal, timeout time.Duration, kill *timer) {
	if child == nil {
		return
	}
	if k.d == nil {
		_ = child.Signal(sig)
		kill.arm(timeout)
		return
	}
	k.sig = sig
	if k.drain != nil {
		return
	}
	k.healthy = false
	k.drain = k.d.Drain()
	k.limit.arm(timeout)
}

// drained ends a drain (all requests finished, or timeout passed:
// timedOut) by sending child the stop signal and arming kill.
func (k *doorLink) drained(timedOut bool, child Child, timeout time.Duration, kill *timer, j journal) {
	k.drain = nil
	k.limit.stop()
	if timedOut {
		j.Logf("requests still in flight after stop_timeout (%s); stopping the child anyway", timeout)
	}
	if child == nil {
		return
	}
	_ = child.Signal(k.sig)
	kill.arm(timeout)
}

// sync tells the door the profile and whether memory is short, after
// every event of the loop; short is also kept in told for the status.
func (k *doorLink) sync(profile string, level, levels int, short bool, told *atomic.Bool) {
	if k.d == nil {
		return
	}
	k.d.Profile(profile, level, levels)
	told.Store(short)
	k.d.Short(short)
}

// doorStatus fills the status object's ready, held, in_flight and
// idle_seconds: the door's view, or without one whether a child runs
// (idle_seconds null).
func (s *Supervisor) doorStatus(st *api.Status, now time.Time) {
	if d := s.deps.Door; d != nil {
		act := s.act.read()
		st.Ready, st.Held, st.InFlight = d.Ready(), act.held, act.inFlight
		st.IdleSeconds = new(act.idle(now, s.started).Seconds())
		return
	}
	st.Ready = st.ChildPID != 0
}
