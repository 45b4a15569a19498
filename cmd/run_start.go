package cmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/control"
	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/internal/backends"
	probeopen "github.com/gpuguard/gpuguard/internal/backends/open"
	"github.com/gpuguard/gpuguard/internal/checkpoint"
	"github.com/gpuguard/gpuguard/internal/deliver"
	"github.com/gpuguard/gpuguard/internal/frontdoor"
	"github.com/gpuguard/gpuguard/internal/journal"
	"github.com/gpuguard/gpuguard/internal/launcher"
	"github.com/gpuguard/gpuguard/internal/lifetime"
	"github.com/gpuguard/gpuguard/internal/metrics"
	"github.com/gpuguard/gpuguard/internal/paths"
	"github.com/gpuguard/gpuguard/internal/proc"
	"github.com/gpuguard/gpuguard/internal/report"
	"github.com/gpuguard/gpuguard/internal/sdnotify"
	"github.com/gpuguard/gpuguard/internal/serve"
	"github.com/gpuguard/gpuguard/internal/sharing"
	"github.com/gpuguard/gpuguard/internal/statefile"
	"github.com/gpuguard/gpuguard/internal/tasks/store"
	"github.com/gpuguard/gpuguard/internal/tenants"
	"github.com/gpuguard/gpuguard/policy"
	"github.com/gpuguard/gpuguard/supervisor"
	"github.com/gpuguard/gpuguard/supervisor/sense"
)

// socketBackend is what the control socket serves: the supervisor's
// status, steps and reload, its admission (reserve, release and the
// shared-GPU requests) and its deferred tasks (package deliver), three
// types kept apart that the socket answers as one.
type socketBackend struct {
	*supervisor.Supervisor
	*supervisor.Admission
	*deliver.Tasks
}

func newSocketBackend(sup *supervisor.Supervisor, tasks *deliver.Tasks) socketBackend {
	return socketBackend{sup, sup.Admission(), tasks}
}

var (
	_ control.Backend  = socketBackend{}
	_ control.Tenancy  = socketBackend{}
	_ control.Tasks    = socketBackend{}
	_ control.Reloader = socketBackend{}
)

// runRun is `gpuguard run`: resolve, claim the name, open everything, and
// supervise until the child ends for good. It is the composition root of
// a run: each part, once open, joins one lifetime group (an (execute,
// interrupt) pair), and the group closes them in the reverse of their
// opening once the supervisor has returned, or at once if a later part
// fails to open.
func runRun(o *RunOptions) error {
	r, err := resolveRun(o)
	if err != nil {
		return err
	}
	logf := lineLog(o.IO.ErrOut, "gpuguard["+r.name+"]: ")
	schedulerForIdle(o.IO.Getenv)
	var g lifetime.Group

	// Claim the name first: a second instance must not touch the state dir.
	srv, err := control.Listen(r.runtimeDir, r.name)
	if err != nil {
		if errors.Is(err, control.ErrAlreadyRunning) {
			return &ExitError{Code: ExitFailure, Err: err}
		}
		return fmt.Errorf("opening the control socket: %w", err)
	}
	g.Hold(func() { _ = srv.Close() }) // the socket goes last

	// The metrics address is bound before anything else starts, so a port
	// in use stops the run before a child holds GPU memory (exit 1, naming
	// the address and what set it); a reload may move it (Endpoint).
	var sup *supervisor.Supervisor
	m := metrics.New(r.name, func() api.Status { return sup.Status() })
	endpoint := metrics.NewEndpoint(m.Handler())
	g.Hold(endpoint.Close)
	move, err := endpoint.Prepare(r.pol.Metrics.Listen)
	if err != nil {
		setting := "[metrics] listen"
		if o.MetricsAddr != nil {
			setting = "--metrics-addr"
		}
		return g.Abort(listenFailed(err, r.pol.Metrics.Listen, setting, ExitConfig))
	}
	g.Hold(move.Abort) // unless committed
	// So is the front door's ([serve] listen): in use, exit 1 naming it.
	var meter serve.Meter
	if r.pol.Serve.Enabled() {
		m.EnableServe()
		meter = m
	}
	queue := &frontdoor.Queue{} // bound to the supervisor and the store below, before the door serves
	bodies, err := frontdoor.BodyTimeoutsFromEnv(o.IO.Getenv)
	if err != nil {
		return g.Abort(&ExitError{Code: ExitConfig, Err: err})
	}
	door, err := frontdoor.Open(r.pol.Serve, frontdoor.Options{Status: func() api.Status { return sup.Status() },
		Healthy: func(gen int) { sup.Healthy(gen) }, Requested: func(held bool) { sup.Requested(held) },
		Meter: meter, Queue: queue, Logf: logf, Bodies: bodies})
	if err != nil {
		return g.Abort(listenFailed(err, r.pol.Serve.Listen, "[serve] listen", ExitFailure))
	}
	if door != nil {
		g.Add(door.Serve, func(error) { door.Close() })
	}

	simDir := ""
	if r.pol.Watch.Backend == backends.Sim {
		if simDir, err = runSimDir(o.SimDir, r.stateDir); err != nil {
			return g.Abort(err)
		}
	}
	// From here a stop signal is the supervisor's to handle (it queues
	// until the loop runs), or probeopen.Await's while the backend opens.
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	g.Hold(func() { signal.Stop(signals) })
	po := probeopen.Options{Backend: r.pol.Watch.Backend, Devices: r.devices, DRMDevices: r.drmDevices,
		SimDir: simDir, SimDevices: o.SimDevices, SimMemory: r.simMemory, Logf: logf}
	po.FromEnv(o.IO.Getenv)
	probe, err := probeopen.Await(func() (gpu.Probe, error) { return probeopen.Probe(po) }, signals, logf)
	if err != nil {
		return g.Abort(openExit(err))
	}
	g.Hold(func() {
		// It never holds gpuguard's exit on a hung driver: it gives up
		// after a second, and says so.
		if err := probe.Close(); err != nil {
			logf("%v", err)
		}
	})
	if err := paths.PrepareStateDir(r.stateDir, os.Geteuid()); err != nil {
		return g.Abort(&ExitError{Code: ExitFailure, Err: err})
	}

	jr, err := journal.Open(filepath.Join(r.stateDir, paths.JournalFile), journalOptions(r.pol.Journal, r.name, time.Now(), logf))
	if err != nil {
		return g.Abort(fmt.Errorf("opening the event journal: %w", err))
	}
	g.Hold(func() { _ = jr.Close() })

	socket := paths.Socket(r.runtimeDir, r.name)
	launch := launcher.New(launcher.Options{Name: r.name, Socket: socket, CgroupParent: o.IO.Getenv("GPUGUARD_CGROUP"), Logf: logf})
	g.Hold(launch.Close)

	ckpt := r.pol.Checkpoint.Resolve(r.stateDir)
	cfg := supervisor.Config{
		Name: r.name, Policy: r.pol, Command: r.command, Observe: o.Observe, StartLevel: r.startLevel,
		CheckpointPath: ckpt, StatePath: filepath.Join(r.stateDir, paths.StateFile),
		SocketPath: socket, SimDir: simDir,
		BaseEnv:  sdnotify.CleanEnv(os.Environ()),
		Describe: describeRun(r.pol, r.pol.Watch.Backend, probe, simDir),
	}
	var faults <-chan gpu.Fault
	if fs, ok := probe.(gpu.FaultSource); ok {
		faults = fs.Faults()
	}
	// The tenants of a shared GPU agree through the runtime dir (docs/sharing.md).
	coord := tenants.New(tenants.Options{RuntimeDir: r.runtimeDir, Name: r.name, Logf: logf})
	g.Hold(func() { _ = coord.Close() })
	m.CountJournalLosses(jr.Dropped)
	if dw, ok := o.IO.ErrOut.(*droppingWriter); ok {
		m.CountOutputLosses(dw.Dropped)
	}
	taskStore, err := store.Open(r.pol.Defer.Store, r.stateDir, r.name, logf)
	if err != nil {
		return g.Abort(withCode(ExitConfig, err))
	}
	g.Hold(func() { _ = taskStore.Close() })
	// The deferred tasks' deliverer is made by New, over the instance's
	// TaskHost; tasks is its API, for the socket, the door and metrics.
	var tasks *deliver.Tasks
	deliverer := func(in *supervisor.TaskHost) supervisor.Deliverer {
		tasks = deliver.New(in, deliver.Options{Store: taskStore, Shared: store.Shared(r.pol.Defer.Store), Replayer: door.Replayer(), Logf: logf})
		return tasks
	}
	sup, err = supervisor.New(cfg, supervisor.Deps{
		Probe: probe, Launcher: launch, Owned: proc.Descendants,
		WriteState: new(statefile.Writer).Write, RotateCheckpoint: checkpoint.Rotate,
		Observers: []supervisor.Observer{jr, m}, Notifier: serviceManager(o.IO.Getenv), Publisher: srv, Meter: m, Logf: logf,
		Faults: faults, Peers: sharing.New(coord, logf), Door: door.Dep(), Tasks: deliverer,
		Actions:  newActionCaller(),
		Reloader: newReloader(o, r, endpoint, jr, door),
		Alarm:    sense.NewKernelAlarm,
	})
	if err != nil {
		return g.Abort(err)
	}
	m.CountTasks(tasks.TaskCounts)
	queue.Sup, queue.Store = tasks, taskStore

	// The control socket answers until the supervisor has returned. Its
	// Serve waits for every connection's handler, so it runs on a goroutine
	// of its own, as it always did: gpuguard's exit never waits on a
	// client's connection (srv.Close, the group's last close, ends them).
	ctx, cancel := context.WithCancel(context.Background())
	g.Add(func() error {
		go srv.Serve(ctx, newSocketBackend(sup, tasks))
		<-ctx.Done()
		return nil
	}, func(error) { cancel() })
	move.Commit()

	return g.Run(func() error {
		code, runErr := sup.Run(ctx, signals)
		signal.Stop(signals) // a signal during the clean-up ends gpuguard, as it always did
		if runErr != nil {
			return &ExitError{Code: commandExit(runErr, code), Err: runErr}
		}
		if code != 0 {
			return &ExitError{Code: code}
		}
		return nil
	}, func(error) { cancel() })
}

// serviceManager is systemd's notify socket when NOTIFY_SOCKET names one,
// else nil: without a service manager the supervisor then builds no
// status line after every sample to tell nobody.
func serviceManager(getenv func(string) string) supervisor.Notifier {
	if n := sdnotify.New(getenv); n.Enabled() {
		return n
	}
	return nil
}

// runSimDir is the sim backend's directory of usage files: --sim-dir,
// else <state-dir>/sim, made absolute. The sim dir lives in the state dir
// by default: that is created first with its own mode, or MkdirAll would
// give it the sim dir's.
func runSimDir(flag, stateDir string) (string, error) {
	dir := flag
	if dir == "" {
		dir = filepath.Join(stateDir, paths.SimDir)
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if err := paths.PrepareStateDir(stateDir, os.Geteuid()); err != nil {
		return "", &ExitError{Code: ExitFailure, Err: err}
	}
	return dir, nil
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
