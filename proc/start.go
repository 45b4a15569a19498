package proc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Start starts the child described by spec and returns once it runs (or
// could not be started: a command that is not found, not executable, a
// missing Dir).
func Start(spec Spec) (*Child, error) {
	spec, err := spec.withDefaults()
	if err != nil {
		return nil, err
	}
	if spec.Dir != "" {
		// Checked here because the fork would report a missing Dir as
		// the command not existing.
		if _, err := os.Stat(spec.Dir); err != nil {
			return nil, fmt.Errorf("starting %q: working directory: %w", spec.Argv[0], err)
		}
	}
	path, err := resolve(spec.Argv[0], spec.Env)
	if err != nil {
		return nil, err
	}
	cmd := &exec.Cmd{
		Path: path,
		Args: spec.Argv,
		Env:  spec.Env,
		Dir:  spec.Dir,
		SysProcAttr: &syscall.SysProcAttr{
			Setpgid:   true,
			Pdeathsig: syscall.SIGKILL,
		},
	}
	if usable(os.Stdin) {
		cmd.Stdin = os.Stdin
	}
	var pl plumbing
	var t *tail
	if spec.ScanStderr {
		t = newTail(spec.TailSize)
	}
	if err := pl.wire(cmd, spec, t); err != nil {
		pl.closeChildEnds()
		pl.abort()
		return nil, fmt.Errorf("starting %q: %w", spec.Argv[0], err)
	}
	c := &Child{done: make(chan struct{})}
	started := make(chan error, 1)
	go c.run(cmd, &pl, t, spec.DrainTimeout, started)
	if err := <-started; err != nil {
		return nil, fmt.Errorf("starting %q: %w", spec.Argv[0], err)
	}
	return c, nil
}

// wire connects the child's stdout and stderr.
func (p *plumbing) wire(cmd *exec.Cmd, spec Spec, t *tail) error {
	out, err := p.output(spec.Stdout, os.Stdout, nil)
	if err != nil {
		return err
	}
	errf, err := p.output(spec.Stderr, os.Stderr, t)
	if err != nil {
		return err
	}
	// Assign only real files: a nil *os.File in an io.Writer is not nil.
	if out != nil {
		cmd.Stdout = out
	}
	if errf != nil {
		cmd.Stderr = errf
	}
	return nil
}

// run starts cmd and then watches it until it is gone, on one goroutine
// locked to its OS thread. The lock is never released: Pdeathsig is sent
// when the thread that forked exits (golang/go#27505), so that thread must
// live as long as the child; a locked goroutine that returns takes its
// thread with it, which is harmless once the child is gone.
func (c *Child) run(cmd *exec.Cmd, pl *plumbing, t *tail, drain time.Duration, started chan<- error) {
	runtime.LockOSThread()
	err := cmd.Start()
	pl.closeChildEnds()
	if err != nil {
		pl.abort()
		started <- err
		return
	}
	c.process, c.pid = cmd.Process, cmd.Process.Pid
	pl.start()
	started <- nil

	// Wait for the exit without reaping: the zombie keeps the pid, and so
	// the group id, from being reused while the rest of the group is
	// killed. A stray worker would otherwise keep its GPU memory.
	waitExited(c.pid)
	killGroup(c.pid) // best effort: nothing can be done about a failure here
	c.reaped()
	cmd.Wait() // the status is read from ProcessState; a non-zero exit is not an error here
	pl.drain(drain)
	var stderr []byte
	if t != nil {
		stderr = t.Bytes()
	}
	c.exit = exitOf(cmd.ProcessState, stderr)
	close(c.done)
}

// waitExited blocks until process pid has exited, leaving it unreaped.
func waitExited(pid int) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return // done, or not our child any more: Wait reports it
		}
	}
}
