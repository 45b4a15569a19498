package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/internal/admission"
	"github.com/gpuguard/gpuguard/policy"
	"github.com/gpuguard/gpuguard/supervisor/core"
	"github.com/gpuguard/gpuguard/supervisor/sense"
)

// Config is what one instance supervises and where its files are.
type Config struct {
	Name string
	// Policy is the policy to start with. New makes it the policy in
	// force (Supervisor.pol, the loop's pol), which a reload replaces; the
	// loop's copy of the Config has none, so nothing there reads it stale.
	Policy  *policy.Policy
	Command []string // argv before ${VAR} expansion
	// Observe decides and logs but never steps down or restarts because of
	// the watermark.
	Observe    bool
	StartLevel int

	CheckpointPath string
	StatePath      string
	SocketPath     string
	SimDir         string // "" unless the sim backend is used

	// BaseEnv is the child's environment before the profile's env and the
	// GPUGUARD_* variables (already without NOTIFY_SOCKET and WATCHDOG_*).
	BaseEnv []string
	// Describe is the start of the start-up line (the policy file and the
	// backend); the first probe result completes it with the watched GPUs.
	// "" prints no such line.
	Describe string
	// ProbeTimeout bounds one probe call; 0 = max(5 intervals, 2s), which
	// follows the interval when a reload changes it. The loop's pacer
	// holds it from the start (the loop's copy of the Config has none).
	ProbeTimeout time.Duration
}

// Deps are the supervisor's collaborators. Probe, Launcher, WriteState and
// RotateCheckpoint are required; the rest may be nil.
type Deps struct {
	Probe    gpu.Probe
	Launcher Launcher
	// Owned returns those of pids that are root or its descendants:
	// which GPU processes are the child's (scope = "process", and whose
	// memory to wait for after an exit).
	Owned            func(root int, pids []int) []int
	WriteState       func(path string, st api.ProfileState) error
	RotateCheckpoint func(path string, keep int) error
	Observers        []Observer
	Notifier         Notifier
	Publisher        Publisher
	Meter            ProbeMeter
	// Faults delivers GPU fault events (Xids) on the watched GPUs; nil
	// when the backend reports none.
	Faults <-chan gpu.Fault
	// Peers deals with the other tenants of the watched GPUs (package
	// sharing); nil decides alone.
	Peers Peers
	// Reloader re-reads the policy for Reload; nil refuses reloads.
	Reloader Reloader
	// Door is the front door ([serve]); nil when there is none.
	Door Door
	// Tasks makes the deferred-task deliverer over the instance's side of
	// it (internal/deliver's New, wired in cmd); nil: no deliverer.
	Tasks func(*TaskHost) Deliverer
	// Actions makes the HTTP calls of server actions (profiles' enter
	// and leave); nil makes every action fail.
	Actions Actions
	// Logf prints one human-readable line about what gpuguard does.
	Logf func(format string, args ...any)
	// Alarm makes the sampling schedule's timers (the next sample's,
	// the hung deadline's); nil: runtime timers, which testing/synctest's
	// fake clock drives. cmd gives sense.NewKernelAlarm, which costs a
	// calm instance fewer thread wake-ups.
	Alarm func() sense.Alarm
}

// errNoFit is the error Run returns, wrapped, with exit code 75
// (exitcode.NoFit) when no profile's needs fit: the free memory when
// when_full = "exit", or the GPUs' whole memory (no profile can ever fit,
// whatever when_full says). It is not exported: callers ask IsNoFit.
var errNoFit = core.ErrNoFit

// IsNoFit reports whether err means that no profile fit (exit 75).
func IsNoFit(err error) bool { return errors.Is(err, errNoFit) }

// Supervisor supervises one child. Run drives it; the other methods are
// safe to call from any goroutine (the control socket calls them). Its
// admission (reservations, leases, the other tenants' requests) is a type
// of its own, reached through Admission, and its deferred tasks a package
// of their own (internal/deliver, a Deliverer here): the control socket
// serves the three together (cmd wires them).
type Supervisor struct {
	// cfg is the Config as given: its Policy is the one the run started
	// with. The policy in force is pol, which a reload replaces.
	cfg  Config
	deps Deps

	reqs chan request
	done chan struct{} // closed when Run returns
	port loopPort      // reqs and done, for calls to the loop
	// wanted: a request held at the front door asks for a wake
	// (asleep.go); act is what idle time counts from (activity.go).
	wanted  chan struct{}
	act     activity
	once    sync.Once
	snap    atomic.Pointer[snapshot]
	toldOOM atomic.Pointer[string]
	started time.Time

	// adm decides reservations and publishes the leases (admission.go);
	// the loop shares its ledger.
	adm *Admission

	// pol is the policy in force (the loop replaces it on a reload);
	// reloadMu makes reloads one at a time, so a reload's Load sees the
	// policy its result will replace. probeAuto: cfg.ProbeTimeout was
	// derived from the interval, and follows it.
	pol       atomic.Pointer[policy.Policy]
	reloadMu  sync.Mutex
	probeAuto bool

	// loop is the actor that Run runs, made by New.
	loop *loop
	// tasks delivers deferred tasks (noTasks without a deliverer).
	tasks Deliverer
	// short is what the loop last told the door: memory is short, so a
	// deferred request is not replayed (TaskHost).
	short atomic.Bool
}

// snapshot is the loop's state copied out after every event; the uptimes
// and the lease count are computed when read (Status).
type snapshot struct {
	status     api.Status
	childStart time.Time
}

// New checks cfg and deps and returns a Supervisor ready to Run.
func New(cfg Config, deps Deps) (*Supervisor, error) {
	switch {
	case cfg.Policy == nil || len(cfg.Policy.Profiles) == 0:
		return nil, errors.New("supervisor: a policy with at least one profile is required")
	case len(cfg.Command) == 0:
		return nil, errors.New("supervisor: no command to run")
	case deps.Probe == nil || deps.Launcher == nil || deps.WriteState == nil || deps.RotateCheckpoint == nil:
		return nil, errors.New("supervisor: Probe, Launcher, WriteState and RotateCheckpoint are required")
	case cfg.StartLevel < 0 || cfg.StartLevel >= len(cfg.Policy.Profiles):
		return nil, fmt.Errorf("supervisor: start level %d outside the ladder", cfg.StartLevel)
	}
	probeAuto := cfg.ProbeTimeout <= 0
	if probeAuto {
		cfg.ProbeTimeout = defaultProbeTimeout(cfg.Policy)
	}
	if deps.Logf == nil {
		deps.Logf = func(string, ...any) {}
	}
	s := &Supervisor{cfg: cfg, deps: deps, reqs: make(chan request), done: make(chan struct{}), wanted: make(chan struct{}, 1), started: time.Now(),
		probeAuto: probeAuto}
	s.port = loopPort{reqs: s.reqs, done: s.done}
	s.act.door = deps.Door
	s.adm = newAdmission(s.port, deps.Peers, &s.snap)
	s.adm.liveRoom = s.liveRoom
	s.pol.Store(cfg.Policy)
	s.tasks = noTasks{}
	if deps.Tasks != nil {
		s.tasks = deps.Tasks(&TaskHost{port: s.port, adm: s.adm, door: deps.Door, short: &s.short, pol: &s.pol})
	}
	st := api.Status{Name: cfg.Name, PID: os.Getpid(), State: api.StateStarting,
		Profile: cfg.Policy.Profiles[cfg.StartLevel].Name, Level: cfg.StartLevel,
		Levels: len(cfg.Policy.Profiles), Priority: cfg.Policy.Priority,
		IntervalSeconds: cfg.Policy.Watch.Interval.Seconds(), Observe: cfg.Observe, GPUs: []api.GPU{}, SimDir: cfg.SimDir}
	s.snap.Store(&snapshot{status: st})
	// The other tenants may ask before Run: they read the loop's own
	// record of the instance from the start.
	s.loop = newLoop(s)
	info := s.loop.self.info(cfg.Policy, nil)
	s.adm.tenant.Store(&info)
	return s, nil
}

// Run supervises until the child ends for good, gpuguard gives up, or a
// stop signal (or ctx's end) has been handled. It returns gpuguard's exit
// code: the child's status, or 75 with an error when no profile fits, or 1
// with an error for gpuguard's own failures and for a start that failed
// (the launcher's error as is: the caller tells a command that cannot run
// from it).
func (s *Supervisor) Run(ctx context.Context, signals <-chan os.Signal) (int, error) {
	var tasks sync.WaitGroup
	defer tasks.Wait()
	tctx, endTasks := context.WithCancel(ctx)
	defer endTasks() // after done is closed: the deliverer ends with Run
	defer s.once.Do(func() { close(s.done) })
	defer s.adm.flushLeases() // before done: a release the others have not seen yet
	tasks.Go(func() { s.tasks.Run(tctx) })
	return s.loop.run(ctx, signals)
}

// Status is the instance's current status object.
func (s *Supervisor) Status() api.Status {
	snap := s.snap.Load()
	st := snap.status
	now := time.Now()
	st.UptimeSeconds = now.Sub(s.started).Seconds()
	if st.ChildPID != 0 {
		st.ChildUptimeSeconds = now.Sub(snap.childStart).Seconds()
	}
	// The ledger is read live: reservations are decided and withdrawn off
	// the loop too, so the snapshot's count can lag a reply just sent.
	st.Leases = s.adm.ledger.Count()
	s.doorStatus(&st, now)
	st.Tasks = s.tasks.TaskCounts().Pending()
	return st
}

// Admission is the instance's admission: Reserve and Release, and what
// the other tenants of its GPUs ask of it.
func (s *Supervisor) Admission() *Admission { return s.adm }

// MarkOOM records that the current child reported an out-of-memory error:
// its coming exit counts as OOM. It takes effect before it returns, so a
// child that exits right after the reply is classified correctly.
func (s *Supervisor) MarkOOM(detail string) {
	if detail == "" {
		detail = "out of memory"
	}
	s.toldOOM.Store(&detail)
}

// Step asks for a profile change now ("down" or "up"). It returns the new
// profile once the state file is written and the event published.
func (s *Supervisor) Step(ctx context.Context, direction string) (string, error) {
	var up bool
	switch direction {
	case "down":
	case "up":
		up = true
	default:
		return "", fmt.Errorf("direction must be down or up, got %q", direction)
	}
	r, err := s.port.call(ctx, request{op: opStep, up: up})
	return r.profile, err
}

type op int

const (
	opStep op = iota
	opReserve
	opRelease
	opTenantStep
	opTenantDecision
	opReady
	opEmit
	opReload
	opHealthy
	opTenantSleep
)

// request is a control call handed to the loop goroutine.
type request struct {
	op      op
	up      bool
	reserve admission.Request
	// others are the other tenants' leases by GPU UUID (reserve on a
	// shared GPU); refuse, when set, is why the reservation cannot be
	// decided and falls back.
	others         map[string]uint64
	refuse         string
	quiet          bool // reserve: journal only a grant
	lease          string
	tenantStep     api.TenantStep
	tenantDecision api.TenantDecision
	tenantSleep    api.TenantSleep
	event          api.Event
	reload         *Reload
	gen            int // opHealthy: the launch
	reply          chan response
}

type response struct {
	profile        string
	decision       admission.Decision
	tenantDecision api.TenantDecision
	changed        []string // reload
	err            error
}
