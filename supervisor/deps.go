package supervisor

import (
	"syscall"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/supervisor/core"
)

// LaunchSpec is everything needed to start one child.
type LaunchSpec struct {
	Argv []string // already expanded; never run through a shell
	Env  []string // the complete environment, KEY=VALUE
	// ScanStderr keeps the tail of the child's stderr for OOM
	// classification while passing it through unchanged.
	ScanStderr bool
}

// Exit is how a child ended (the decision core's type: it classifies it).
type Exit = core.Exit

// Child is one running child process (its main process and its group).
type Child interface {
	PID() int
	// Signal sends sig to the child's main process only.
	Signal(sig syscall.Signal) error
	// Kill sends SIGKILL to the child's whole process group.
	Kill() error
	// Done is closed once the main process has exited, the rest of its
	// group has been killed and stderr has been drained (bounded).
	Done() <-chan struct{}
	// Exit is valid once Done is closed.
	Exit() Exit
}

// SignalChecker is a Child that can tell whether its main process catches
// (or ignores) a signal, so that sending it cannot end the process. The
// supervisor asks before every notification: a server still importing its
// framework has no handler yet, and the notify signal's default action
// would kill it. An error means the answer is unknown (the process is
// gone, /proc cannot be read): the supervisor then skips the signal too,
// since the state file carries the change either way. A Child without this
// method is always signalled.
type SignalChecker interface {
	Catches(sig syscall.Signal) (bool, error)
}

// Owner is a Child that can tell which processes are its own better than
// their parentage can (its cgroup holds daemons that left the tree). The
// supervisor asks it, when a Child has it, instead of Deps.Owned.
type Owner interface {
	Owned(pids []int) []int
}

// Launcher starts children. Its errors name the command: the supervisor
// returns them from Run as they are.
type Launcher interface {
	Launch(spec LaunchSpec) (Child, error)
}

// CommandChecker is a Launcher that can tell, before anything is written
// for a start (checkpoint generation, state file), that spec's command
// cannot run at all: not found, not executable. The supervisor ends with
// Check's error as it would with Launch's.
type CommandChecker interface {
	Check(spec LaunchSpec) error
}

// Observer receives every event the supervisor emits, in order, on the loop
// goroutine. It must not block (the journal buffers, metrics count).
type Observer interface {
	Observe(ev api.Event)
}

// Notifier is the service manager (systemd sd_notify). All methods must be
// cheap and never block for long; a nil Notifier is valid.
type Notifier interface {
	Ready() error
	Status(text string) error
	Stopping() error
	Watchdog() error
	// WatchdogInterval is how often Watchdog must be called; 0 = never.
	WatchdogInterval() time.Duration
}

// Publisher delivers profile events to socket subscribers without blocking.
type Publisher interface {
	Publish(st api.ProfileState)
}

// ProbeMeter records the duration and outcome of every probe tick.
type ProbeMeter interface {
	ObserveProbe(d time.Duration, err error)
}
