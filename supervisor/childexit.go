package supervisor

import (
	"errors"
	"syscall"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/supervisor/core"
)

var (
	errShutdown     = errors.New("instance is shutting down")
	errUnknownLease = errors.New("no such lease")
)

// onExit handles the child's end: what every exit does (the event, the
// rooms told), then the core's verdict on what explains it (core.Exited):
// finish, sleep, or plan the next start.
func (l *loop) onExit() {
	now := time.Now()
	run := &l.life.run
	e := run.child.Exit()
	ran := now.Sub(run.childStart)
	notifiedAt := run.notifiedAt
	run.notifiedAt = time.Time{}
	release := run.childTree
	run.child = nil
	l.pace.SetTarget(0, nil)
	l.life.stop.stopWait.stop()
	l.life.door.exited()
	l.life.acts.exited()
	l.ledger.Clear()
	l.s.adm.leasesChanged()
	l.s.tasks.ChildExited() // its lease ended with the child
	told := ""
	if p := l.s.toldOOM.Swap(nil); p != nil {
		told = *p
	}
	l.minute.End(now, l.pol.Watermark, &l.out)
	ev := api.Event{Event: api.EventExit, Status: new(e.Status()), Stderr: core.LastLines(e.Stderr, 20)}
	if e.Signal != 0 {
		ev.Signal = int(e.Signal)
	} else {
		ev.ExitCode = new(e.Code)
	}
	l.out.Emit(ev)
	l.deps.Logf("child exited with status %d after %s", e.Status(), ran.Round(time.Millisecond))

	in := core.Exited{Now: now, Exit: e, Ran: ran, Told: told, Stopping: l.life.stop.stopping, Lost: l.health.LostErr(),
		Notified: notifiedAt, NotifySig: run.notifiedSig}
	if p := l.life.plan; p != nil {
		in.Plan = &core.Plan{Level: p.level, From: p.from, Reload: p.reason == api.ReasonReload, Sleep: p.sleep, Reason: core.Reason(p.reason)}
	}
	if f, ok := l.faults.Cause(now, run.childStart); ok {
		in.Fault = &core.Fault{Index: f.Index, UUID: f.UUID, Meaning: gpu.XidMeaning(f.Xid)}
	}
	l.life.wait.release = release // the next start waits for its memory to go
	l.feed(in, nil)
	l.wakeIfWanted(now) // a child stopped to sleep while a request was held
}

// onStopSignal forwards a stop signal to the child exactly once, then
// waits stop_timeout before killing its group; a second signal kills now
// (the core's rules: core.StopSignal).
func (l *loop) onStopSignal(sig syscall.Signal) {
	if l.life.end.finished {
		return
	}
	l.feed(core.StopSignal{Sig: sig, Running: l.life.run.child != nil, Stopping: l.life.stop.stopping, Lost: l.health.LostErr() != nil,
		Signalled: l.life.signalled()}, nil)
}
