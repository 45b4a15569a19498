package supervisor

import (
	"strconv"
	"strings"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/policy"
	"github.com/gpuguard/gpuguard/supervisor/core"
)

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

// launch starts a child in profile e.Level, chosen by fit e.Fit, for
// e.Why: the fit is told once the child runs (dated as its start,
// journaled before it), so that a command that cannot run says so in its
// one line and nothing else; that command is found out before anything
// is written (when the launcher can check). The fit names the profile
// started in, also when none fitted (when_full = "lowest") or none could
// be judged (no reading). The fit's line and event, the start event and
// the state file name why.
func (l *loop) launch(e core.Launch) {
	level, j := e.Level, e.Fit
	vars := childVars(&l.cfg, l.pol, level, l.life.hist)
	argv, err := policy.ExpandArgs(l.cfg.Command, vars)
	if err != nil {
		l.feed(core.Unstartable{Err: err, Expand: true}, nil)
		return
	}
	spec := LaunchSpec{Argv: argv, Env: childEnv(l.cfg.BaseEnv, vars), ScanStderr: l.pol.OOM.ScanStderr}
	if c, ok := l.deps.Launcher.(CommandChecker); ok {
		if err := c.Check(spec); err != nil {
			l.feed(core.Unstartable{Err: err}, nil)
			return
		}
	}
	life := &l.life
	from := life.level
	life.level = level
	if life.hist.starts > 0 {
		if err := l.deps.RotateCheckpoint(l.cfg.CheckpointPath, l.pol.Checkpoint.Keep); err != nil {
			// The checkpoint itself is untouched; only a generation is missing.
			l.deps.Logf("keeping a checkpoint generation failed (the checkpoint is untouched): %v", err)
		}
	}
	// The state file names the real reason (critical, manual, ...) where
	// GPUGUARD_LAST_EXIT says watermark.
	life.record(l.pol, life.hist.launchWhat(e.Why))
	l.s.toldOOM.Store(nil)
	// The child may run (and speak) before Launch returns: its start is
	// when gpuguard began starting it, so that no one who heard from it
	// sees a start event dated after that.
	launched := time.Now()
	child, err := l.deps.Launcher.Launch(spec)
	if err != nil {
		l.feed(core.Unstartable{Err: err}, nil)
		return
	}
	j.Started, j.Level = true, level
	l.fit.note(&l.out, l.pol, life.hist, launched, j, e.Outcome, e.Why)
	life.hist.starts++
	life.run.child = child
	life.run.childStart = launched
	life.run.childTree = map[int]bool{child.PID(): true}
	life.state = api.StateStarting
	l.feed(core.Launched{Now: launched, Used: startBaseline(l.latest.lastSample, life.run.childTree)}, nil)
	l.pace.Reset()
	l.pace.SetTarget(child.PID(), ownedBy(child, l.deps.Owned))
	ev := api.Event{Time: launched, Event: api.EventStart, PID: child.PID(), Restarts: life.hist.restarts, Reason: string(e.Why)}
	if from != level {
		ev.From, ev.To = l.pol.Profiles[from].Name, l.pol.Profiles[level].Name
	}
	l.out.Emit(ev)
	l.deps.Logf("started %s (pid %d) in profile %s (%d/%d)", argv[0], child.PID(), l.pol.Profiles[level].Name, level, len(l.pol.Profiles))
	life.door.launched(life.hist.starts)
	if n := l.deps.Notifier; n != nil && life.hist.starts == 1 && life.door.readyAtLaunch() { // READY=1 once, for the first child
		_ = n.Ready()
	}
	if life.plan != nil {
		if len(life.plan.replies) > 0 {
			l.publishSnapshot() // a status asked after the reply shows the new child
		}
		for _, r := range life.plan.replies {
			r <- response{profile: l.pol.Profiles[level].Name}
		}
		life.plan = nil
	}
	// The first sample of the new child is due now, not a period away.
	l.pace.SampleNow()
}

// ownedBy is how to tell which GPU processes are child's: its own Owner
// (a cgroup holds daemons that left the tree), else owned by parentage
// (nil: unknown).
func ownedBy(child Child, owned func(root int, pids []int) []int) func(pids []int) []int {
	if o, ok := child.(Owner); ok {
		return o.Owned
	}
	if owned == nil {
		return nil
	}
	pid := child.PID()
	return func(pids []int) []int { return owned(pid, pids) }
}
