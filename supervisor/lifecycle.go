package supervisor

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/internal/exitcode"
	"github.com/gpuguard/gpuguard/policy"
	"github.com/gpuguard/gpuguard/supervisor/core"
)

var (
	errShutdown     = errors.New("instance is shutting down")
	errUnknownLease = errors.New("no such lease")
)

// tryStart runs on every sample while waiting. Every start it makes, and
// every wait for memory, is told as a fit judgement (fit.go).
func (l *loop) tryStart(r sampleResult) {
	var devs []core.Device
	if r.err == nil {
		devs = devices(r.sample.Devices)
		if effs := l.decide(core.NoFitEver{Devices: devs, Target: l.life.wait.target}); len(effs) > 0 {
			l.doAll(effs, nil)
			return
		}
	}
	if l.faults.hold(r, &l.out) {
		return
	}
	now := time.Now()
	rw := l.pol.Restart
	if r.err != nil {
		// Without data there is no fit to judge; do not hold the service
		// hostage to the monitoring. Start where we aimed once any
		// release wait is over.
		if (len(l.life.wait.release) == 0 || now.Sub(l.life.wait.waitSince) >= rw.ReleaseTimeout) && l.shared.forStart(r, l.pol, l.life.wait.target, l.claims()) {
			l.launch(l.life.wait.target, core.Fit{}, fmt.Sprintf("starting in %s unchecked: no GPU reading (%v)", l.pol.Profiles[l.life.wait.target].Name, r.err))
		}
		return
	}
	if len(l.life.wait.release) > 0 {
		if anyAlive(r.sample, l.life.wait.release) && now.Sub(l.life.wait.waitSince) < rw.ReleaseTimeout {
			return
		}
		if anyAlive(r.sample, l.life.wait.release) {
			l.deps.Logf("the last child's GPU memory was not freed within %s; starting anyway", rw.ReleaseTimeout)
		}
		l.life.wait.release = nil
	}
	if !l.shared.forStart(r, l.pol, l.life.wait.target, l.claims()) {
		return // one start at a time on a shared GPU
	}
	l.doAll(l.decide(core.Start{Devices: devs, Target: l.life.wait.target}), nil)
}

// childVars are the GPUGUARD_* variables and the profile's env, which both
// go into the child's environment and expand ${VAR} in its arguments.
func childVars(cfg *Config, pol *policy.Policy, level int, h history) map[string]string {
	p := pol.Profiles[level]
	v := make(map[string]string, len(p.Env)+10)
	for k, val := range p.Env {
		v[k] = val
	}
	v["GPUGUARD_NAME"] = cfg.Name
	v["GPUGUARD_PROFILE"] = p.Name
	v["GPUGUARD_LEVEL"] = strconv.Itoa(level)
	v["GPUGUARD_LEVELS"] = strconv.Itoa(len(pol.Profiles))
	v["GPUGUARD_RESTARTS"] = strconv.Itoa(h.restarts)
	v["GPUGUARD_LAST_EXIT"] = h.lastExit
	v["GPUGUARD_CHECKPOINT"] = cfg.CheckpointPath
	v["GPUGUARD_STATE"] = cfg.StatePath
	v["GPUGUARD_SOCKET"] = cfg.SocketPath
	if cfg.SimDir != "" {
		v["GPUGUARD_SIM_DIR"] = cfg.SimDir
	}
	return v
}

// childEnv is base with vars set, later values replacing earlier ones.
func childEnv(base []string, vars map[string]string) []string {
	env := make([]string, 0, len(base)+len(vars))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, override := vars[k]; !override {
			env = append(env, kv)
		}
	}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	return env
}

// launch starts a child in profile level, chosen by fit j: the fit is
// told once the child runs (dated as its start, journaled before it), so
// that a command that cannot run says so in its one line and nothing else;
// that command is found out before anything is written (when the
// launcher can check). The fit names the profile started in, also when
// none fitted (when_full = "lowest") or none could be judged (no reading).
func (l *loop) launch(level int, j core.Fit, outcome string) {
	vars := childVars(&l.cfg, l.pol, level, l.life.hist)
	argv, err := policy.ExpandArgs(l.cfg.Command, vars)
	if err != nil {
		l.life.state = api.StateFatal
		l.life.finish(exitcode.Config, fmt.Errorf("expanding the command: %w", err))
		return
	}
	spec := LaunchSpec{Argv: argv, Env: childEnv(l.cfg.BaseEnv, vars), ScanStderr: l.pol.OOM.ScanStderr}
	if c, ok := l.deps.Launcher.(CommandChecker); ok {
		if err := c.Check(spec); err != nil {
			l.doAll(cannotStart(err), nil)
			return
		}
	}
	from := l.level
	l.level = level
	if l.life.hist.starts > 0 {
		if err := l.deps.RotateCheckpoint(l.cfg.CheckpointPath, l.pol.Checkpoint.Keep); err != nil {
			// The checkpoint itself is untouched; only a generation is missing.
			l.deps.Logf("keeping a checkpoint generation failed (the checkpoint is untouched): %v", err)
		}
	}
	// A restart gpuguard asked for keeps its plan until the start: the
	// state file names the plan's reason (critical, manual, ...) where
	// GPUGUARD_LAST_EXIT says watermark.
	reason := "start"
	if l.life.plan != nil {
		reason = "restart after " + l.life.plan.reason
	} else if l.life.hist.lastExit != "none" {
		reason = "restart after " + l.life.hist.lastExit
	}
	if st, err := l.stateFile.writeAt(l.pol.Profiles[l.level], l.level, reason); err != nil {
		l.deps.Logf("%v", err)
	} else {
		l.out.publish(st)
	}
	l.s.toldOOM.Store(nil)
	// The child may run (and speak) before Launch returns: its start is
	// when gpuguard began starting it, so that no one who heard from it
	// sees a start event dated after that.
	launched := time.Now()
	child, err := l.deps.Launcher.Launch(spec)
	if err != nil {
		l.doAll(cannotStart(err), nil)
		return
	}
	j.Started, j.Level = true, level
	l.fit.note(&l.out, l.pol, l.life.hist, launched, j, outcome)
	l.life.hist.starts++
	l.life.run.child = child
	l.life.run.childStart = launched
	l.life.run.ready = false
	l.life.run.childTree = map[int]bool{child.PID(): true}
	l.life.state = api.StateStarting
	l.decide(core.Launched{})
	l.pace.reset()
	l.pace.setTarget(l.life.run.child, l.deps.Owned)
	l.shared.began(l.life.run.childStart, l.latest.lastSample, l.life.run.childTree, l.pol.Watch.Settle)
	ev := api.Event{Time: launched, Event: api.EventStart, PID: child.PID(), Restarts: l.life.hist.restarts, Reason: l.life.hist.lastExit}
	if from != level {
		ev.From, ev.To = l.pol.Profiles[from].Name, l.pol.Profiles[level].Name
	}
	l.out.emit(ev)
	l.deps.Logf("started %s (pid %d) in profile %s (%d/%d)", argv[0], child.PID(), l.pol.Profiles[level].Name, level, len(l.pol.Profiles))
	l.door.launched(l.life.hist.starts)
	if n := l.deps.Notifier; n != nil && l.life.hist.starts == 1 && l.door.readyAtLaunch() { // READY=1 once, for the first child
		_ = n.Ready()
	}
	if l.life.plan != nil {
		if len(l.life.plan.replies) > 0 {
			l.publishSnapshot() // a status asked after the reply shows the new child
		}
		for _, r := range l.life.plan.replies {
			r <- response{profile: l.pol.Profiles[level].Name}
		}
		l.life.plan = nil
	}
	// The first sample of the new child is due now, not a period away.
	l.pace.sampleNow()
}

// onExit handles the child's end: what every exit does (the event, the
// rooms told), then the core's verdict on what explains it (core.Exited):
// finish, sleep, or plan the next start.
func (l *loop) onExit() {
	now := time.Now()
	e := l.life.run.child.Exit()
	ran := now.Sub(l.life.run.childStart)
	notifiedAt := l.life.run.notifiedAt
	l.life.run.notifiedAt = time.Time{}
	release := l.life.run.childTree
	l.life.run.child = nil
	l.pace.setTarget(nil, l.deps.Owned)
	l.shared.endStarting("") // the exit line says it; "start complete" would be wrong
	l.life.stop.stopWait.stop()
	l.door.exited()
	l.acts.exited()
	l.ledger.Clear()
	l.shared.leasesChanged(l.s.adm.publishLeases)
	l.s.tasks.childExited() // its lease ended with the child
	told := ""
	if p := l.s.toldOOM.Swap(nil); p != nil {
		told = *p
	}
	l.minute.end(now, l.pol.Watermark, &l.out)
	ev := api.Event{Event: api.EventExit, Status: ptr(e.Status()), Stderr: core.LastLines(e.Stderr, 20)}
	if e.Signal != 0 {
		ev.Signal = int(e.Signal)
	} else {
		ev.ExitCode = ptr(e.Code)
	}
	l.out.emit(ev)
	l.deps.Logf("child exited with status %d after %s", e.Status(), ran.Round(time.Millisecond))

	in := core.Exited{Now: now, Exit: e, Ran: ran, Told: told, Ready: l.life.run.ready, Stopping: l.life.stop.stopping, Lost: l.health.lostErr,
		Notified: notifiedAt, NotifySig: l.life.run.notifiedSig}
	if p := l.life.plan; p != nil {
		in.Plan = &core.Plan{Level: p.level, From: p.from, Reload: p.reason == api.ReasonReload, Sleep: p.sleep}
	}
	if f, ok := l.faults.cause(now, l.life.run.childStart); ok {
		in.Fault = &core.Fault{Index: f.Index, UUID: f.UUID, Meaning: gpu.XidMeaning(f.Xid)}
	}
	l.life.wait.release = release // the next start waits for its memory to go
	l.doAll(l.decide(in), nil)
}

// onStopSignal forwards a stop signal to the child exactly once, then
// waits stop_timeout before killing its group; a second signal kills now
// (the core's rules: core.StopSignal).
func (l *loop) onStopSignal(sig syscall.Signal) {
	if l.life.end.finished {
		return
	}
	l.doAll(l.decide(core.StopSignal{Sig: sig, Running: l.life.run.child != nil, Stopping: l.life.stop.stopping, Lost: l.health.lostErr != nil}), nil)
}

// cannotStart is the end of a run after a failed start. err comes from the
// launcher, which names the command; it is returned, not logged (the
// caller prints it once).
func cannotStart(err error) []core.Effect {
	return []core.Effect{
		core.Journal{Event: api.Event{Event: api.EventGiveUp, Detail: err.Error()}},
		core.Finish{State: api.StateFatal, End: core.EndFailure, Err: err},
	}
}

func ptr[T any](v T) *T { return &v }
