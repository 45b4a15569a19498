package proc

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"

	"github.com/gpuguard/gpuguard/internal/exitcode"
)

// Exit is how a child ended. Its fields match supervisor.Exit, so one
// converts to the other.
type Exit struct {
	Code   int            // exit status; -1 when killed by a signal
	Signal syscall.Signal // the killing signal, or 0
	Stderr []byte         // the last TailSize bytes of stderr; nil unless scanned
}

// Status is the child's status as gpuguard reports it: n for exit code n,
// 128+s for a child killed by signal s (the shell's and tini's convention).
func (e Exit) Status() int {
	if e.Signal != 0 {
		return exitcode.Signaled(int(e.Signal))
	}
	return e.Code
}

// ErrSIGURG is returned by Signal for SIGURG, which the Go runtime uses for
// preemption and a child must never be sent on gpuguard's behalf.
var ErrSIGURG = errors.New("refusing to send SIGURG")

// Child is one started child: its main process and its process group.
// Its methods are safe for concurrent use.
type Child struct {
	process *os.Process
	pid     int
	done    chan struct{}
	exit    Exit // written once, before done is closed

	cg *cgroup // the child's own cgroup, or nil

	mu     sync.Mutex
	exited bool // the main process has exited; its group id may be reused
}

// PID is the main process's pid, which is also its process group id.
func (c *Child) PID() int { return c.pid }

// Cgroup is the directory of the child's own cgroup, or "" when it runs in
// gpuguard's (cgroups unavailable or not asked for).
func (c *Child) Cgroup() string {
	if c.cg == nil {
		return ""
	}
	return c.cg.path
}

// Signal sends sig to the main process only, never to its group: a server
// forwards stop requests to its workers itself, and sending them directly
// would make workers die before the server could shut down in order.
// After the main process has exited it returns an error matching
// os.ErrProcessDone.
func (c *Child) Signal(sig syscall.Signal) error {
	if sig == syscall.SIGURG {
		return ErrSIGURG
	}
	if err := c.process.Signal(sig); err != nil {
		return fmt.Errorf("signalling child %d: %w", c.pid, err)
	}
	return nil
}

// Kill sends SIGKILL to the whole process group, to the child's cgroup
// when it has one, and to the main process (in case it moved to another
// group). Once the main process has exited there is nothing left to kill
// (its group and cgroup were killed then) and Kill returns nil.
func (c *Child) Kill() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.exited {
		return nil
	}
	gerr := killGroup(c.pid)
	if c.cg != nil {
		if err := c.cg.kill(); err != nil && gerr == nil {
			gerr = err
		}
	}
	if err := c.process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("killing child %d: %w", c.pid, err)
	}
	return gerr
}

// Done is closed once the main process has exited, the rest of its group
// has been killed and its output has been drained (for at most
// DrainTimeout).
func (c *Child) Done() <-chan struct{} { return c.done }

// Exit is how the child ended. It waits for Done.
func (c *Child) Exit() Exit {
	<-c.done
	return c.exit
}

// reaped marks that the main process is about to be reaped, after which
// its pid, and so its group id, may be reused: Kill must not signal it any
// more. Before that the zombie keeps the id reserved, which is why the
// group is killed before the main process is reaped.
func (c *Child) reaped() {
	c.mu.Lock()
	c.exited = true
	c.mu.Unlock()
}

// killGroup sends SIGKILL to every process in group pgid. An empty group is
// not an error.
func killGroup(pgid int) error {
	err := syscall.Kill(-pgid, syscall.SIGKILL)
	if err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("killing process group %d: %w", pgid, err)
	}
	return nil
}

// exitOf turns a wait status into an Exit.
func exitOf(ps *os.ProcessState, stderr []byte) Exit {
	if ps == nil {
		// Wait failed: someone else reaped the child. The status is
		// lost; report a failure rather than success.
		return Exit{Code: -1, Stderr: stderr}
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if ok && ws.Signaled() {
		return Exit{Code: -1, Signal: ws.Signal(), Stderr: stderr}
	}
	return Exit{Code: ps.ExitCode(), Stderr: stderr}
}
