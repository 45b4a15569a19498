package cmd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/checkpoint"
	"github.com/gpuguard/gpuguard/control"
	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/journal"
	"github.com/gpuguard/gpuguard/metrics"
	"github.com/gpuguard/gpuguard/nvml"
	"github.com/gpuguard/gpuguard/paths"
	"github.com/gpuguard/gpuguard/policy"
	"github.com/gpuguard/gpuguard/proc"
	"github.com/gpuguard/gpuguard/report"
	"github.com/gpuguard/gpuguard/sdnotify"
	"github.com/gpuguard/gpuguard/serve"
	"github.com/gpuguard/gpuguard/statefile"
	"github.com/gpuguard/gpuguard/supervisor"
	"github.com/gpuguard/gpuguard/tenants"
)

// The supervisor answers the shared-GPU and deferred-task requests of its
// control socket.
var (
	_ control.Tenancy = (*supervisor.Supervisor)(nil)
	_ control.Tasks   = (*supervisor.Supervisor)(nil)
)

// runRun is `gpuguard run`: resolve, claim the name, open everything, and
// supervise until the child ends for good.
func runRun(o *RunOptions) error {
	r, err := resolveRun(o)
	if err != nil {
		return err
	}
	logf := func(format string, args ...any) {
		fmt.Fprintf(o.IO.ErrOut, "gpuguard[%s]: %s\n", r.name, fmt.Sprintf(format, args...))
	}
	schedulerForIdle(o.IO.Getenv)

	// Claim the name first: a second instance must not touch the state dir.
	srv, err := control.Listen(r.runtimeDir, r.name)
	if err != nil {
		if errors.Is(err, control.ErrAlreadyRunning) {
			return &ExitError{Code: ExitFailure, Err: err}
		}
		return fmt.Errorf("opening the control socket: %w", err)
	}
	defer srv.Close()

	// The metrics address is bound before anything else starts, so a port
	// in use is a configuration error; a reload may move it (Endpoint).
	var sup *supervisor.Supervisor
	m := metrics.New(r.name, func() api.Status { return sup.Status() })
	endpoint := metrics.NewEndpoint(m.Handler())
	defer endpoint.Close()
	move, err := endpoint.Prepare(r.pol.Metrics.Listen)
	if err != nil {
		return &ExitError{Code: ExitConfig, Err: fmt.Errorf("metrics listen address %q: %w", r.pol.Metrics.Listen, err)}
	}
	defer move.Abort() // unless committed
	// So is the front door's ([serve] listen): in use, exit 1 naming it.
	var meter serve.Meter
	if r.pol.Serve.Enabled() {
		m.EnableServe()
		meter = m
	}
	queue := &doorQueue{} // bound to the supervisor and the store below, before the door serves
	door, err := openDoor(r.pol.Serve, func() api.Status { return sup.Status() },
		func(gen int) { sup.Healthy(gen) }, func(held bool) { sup.Requested(held) }, meter, queue, logf)
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: err}
	}
	defer door.close(logf)

	simDir := ""
	if r.pol.Watch.Backend == "sim" {
		simDir = o.SimDir
		if simDir == "" {
			simDir = filepath.Join(r.stateDir, paths.SimDir)
		}
		if simDir, err = filepath.Abs(simDir); err != nil {
			return err
		}
		// The sim dir lives in the state dir by default: create that first
		// with its own mode, or MkdirAll would give it the sim dir's.
		if err := paths.PrepareStateDir(r.stateDir, os.Geteuid()); err != nil {
			return &ExitError{Code: ExitFailure, Err: err}
		}
	}
	// From here a stop signal is the supervisor's to handle (it queues
	// until the loop runs), or awaitOpen's while the backend opens.
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(signals)
	po := probeOptions{Backend: r.pol.Watch.Backend, Devices: r.devices, DRMDevices: r.drmDevices,
		SimDir: simDir, SimDevices: o.SimDevices, SimMemory: r.simMemory, NVMLLib: o.IO.Getenv(nvml.EnvLibrary),
		Sysfs: o.IO.Getenv(envSysfs), Procfs: o.IO.Getenv(envProcfs), Logf: logf}
	probe, err := awaitOpen(func() (gpu.Probe, error) { return openProbe(po) }, signals, logf)
	if err != nil { // a stop (awaitOpen's ExitError) passes through withCode as it is
		if errors.Is(err, gpu.ErrUnavailable) {
			return &ExitError{Code: ExitUnavailable, Err: err}
		}
		return withCode(ExitUsage, err)
	}
	defer func() {
		// It never holds gpuguard's exit on a hung driver: it gives up
		// after a second, and says so.
		if err := probe.Close(); err != nil {
			logf("%v", err)
		}
	}()
	if err := paths.PrepareStateDir(r.stateDir, os.Geteuid()); err != nil {
		return &ExitError{Code: ExitFailure, Err: err}
	}

	jr, err := journal.Open(filepath.Join(r.stateDir, paths.JournalFile), journalOptions(r.pol.Journal, r.name, time.Now(), logf))
	if err != nil {
		return fmt.Errorf("opening the event journal: %w", err)
	}
	defer jr.Close()

	launcher, closeLauncher := newProcLauncher(r, o.IO.Getenv("GPUGUARD_CGROUP"), logf)
	defer closeLauncher()

	ckpt := r.pol.Checkpoint.Resolve(r.stateDir)
	// It prepares each state file write after the last one (statefile.Writer).
	stateWriter := statefile.NewWriter()
	defer stateWriter.Close()
	notifier := sdnotify.New(o.IO.Getenv)
	cfg := supervisor.Config{
		Name: r.name, Policy: r.pol, Command: r.command, Observe: o.Observe, StartLevel: r.startLevel,
		CheckpointPath: ckpt, StatePath: filepath.Join(r.stateDir, paths.StateFile),
		SocketPath: paths.Socket(r.runtimeDir, r.name), SimDir: simDir,
		BaseEnv:  sdnotify.CleanEnv(os.Environ()),
		Describe: describeRun(r.pol, r.pol.Watch.Backend, probe, simDir),
	}
	var faults <-chan gpu.Fault
	if fs, ok := probe.(gpu.FaultSource); ok {
		faults = fs.Faults()
	}
	// The tenants of a shared GPU agree through the runtime dir (docs/sharing.md).
	coord := tenants.New(tenants.Options{RuntimeDir: r.runtimeDir, Name: r.name, Logf: logf})
	defer coord.Close()
	m.CountJournalLosses(jr.Dropped)
	if dw, ok := o.IO.ErrOut.(*droppingWriter); ok {
		m.CountOutputLosses(dw.Dropped)
	}
	taskStore, err := openTaskStore(r, logf)
	if err != nil {
		return withCode(ExitConfig, err)
	}
	defer taskStore.Close()
	sup, err = supervisor.New(cfg, supervisor.Deps{
		Probe: probe, Launcher: launcher, Owned: proc.Descendants,
		WriteState: stateWriter.Write, RotateCheckpoint: checkpoint.Rotate,
		Observers: []supervisor.Observer{jr, m}, Notifier: notifier, Publisher: srv, Meter: m, Logf: logf,
		Faults: faults, Coordinator: coord, Door: door.dep(), Tasks: taskStore, Replayer: door.replayer(),
		Actions:  newActionCaller(),
		Reloader: &runReloader{opts: o, start: r, metrics: endpoint, journal: jr, door: door},
	})
	if err != nil {
		return err
	}
	m.CountTasks(sup.TaskCounts)
	queue.sup, queue.store = sup, taskStore

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go srv.Serve(ctx, sup)
	move.Commit()
	door.serve()

	code, runErr := sup.Run(ctx, signals)
	signal.Stop(signals) // a signal during the clean-up below ends gpuguard, as it always did
	if runErr != nil {
		return &ExitError{Code: commandExit(runErr, code), Err: runErr}
	}
	if code != 0 {
		return &ExitError{Code: code}
	}
	return nil
}

// journalOptions turns the policy's [journal] keys into the journal's
// options, with a running account (report.Tally) from now for the totals
// records. max_files = 0 keeps no rotated file, where the journal's zero
// means its default.
func journalOptions(pol policy.Journal, name string, now time.Time, logf func(string, ...any)) journal.Options {
	return journal.Options{Limits: journalLimits(pol), Totals: report.NewTally(now), Name: name, Logf: logf}
}

// journalLimits are the policy's [journal] keys as the journal's limits, at
// start and after a reload.
func journalLimits(pol policy.Journal) journal.Limits {
	files := pol.MaxFiles
	if files == 0 {
		files = -1
	}
	return journal.Limits{MaxBytes: int64(pol.MaxSize), MaxFiles: files, MaxAge: pol.MaxAge}
}

// procLauncher starts children with package proc. Both fields may be nil.
type procLauncher struct {
	reaper  *proc.Reaper
	cgroups *proc.Cgroups
}

// newProcLauncher sets up the cleanup that goes beyond the child's process
// group (docs/reliability.md): gpuguard becomes a child subreaper that reaps
// orphans, and, where cgroup v2 is writable, each child gets a cgroup of its
// own. cgroupParent is $GPUGUARD_CGROUP ("" = gpuguard's own cgroup, "off").
// Call it while holding the instance lock: it kills what an earlier,
// SIGKILLed instance of the same name left in its cgroups.
func newProcLauncher(r *resolvedRun, cgroupParent string, logf func(string, ...any)) (procLauncher, func()) {
	var l procLauncher
	var err error
	if l.reaper, err = proc.NewReaper(); err != nil {
		logf("%v: orphaned grandchildren are left to init", err)
	}
	sock, _ := filepath.Abs(paths.Socket(r.runtimeDir, r.name))
	sum := sha256.Sum256([]byte(sock)) // the instance is (runtime dir, name), as its lock
	key := r.name + "-" + hex.EncodeToString(sum[:4])
	if l.cgroups, err = proc.OpenCgroups(cgroupParent, key, logf); err != nil && cgroupParent != proc.CgroupsOff {
		logf("no cgroup per child (%v): a process that leaves the child's process group is not cleaned up", err)
	}
	return l, func() {
		if l.cgroups != nil {
			if err := l.cgroups.Close(); err != nil {
				logf("%v", err)
			}
		}
		if l.reaper != nil {
			_ = l.reaper.Close()
		}
	}
}

func (l procLauncher) Launch(spec supervisor.LaunchSpec) (supervisor.Child, error) {
	c, err := proc.Start(proc.Spec{Argv: spec.Argv, Env: spec.Env, ScanStderr: spec.ScanStderr,
		Cgroups: l.cgroups, Reaper: l.reaper})
	if err != nil {
		return nil, err
	}
	return procChild{c}, nil
}

// Check finds out, before the supervisor writes anything for a start,
// whether spec's command can run (proc.Check: a *proc.RunError if not).
func (l procLauncher) Check(spec supervisor.LaunchSpec) error {
	return proc.Check(proc.Spec{Argv: spec.Argv, Env: spec.Env})
}

// procChild adapts *proc.Child to supervisor.Child (the Exit types match)
// and to supervisor.SignalChecker (Catches reads /proc/<pid>/status).
type procChild struct{ *proc.Child }

func (c procChild) Exit() supervisor.Exit { return supervisor.Exit(c.Child.Exit()) }
