package proc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Start starts the child described by spec and returns once it runs (or
// could not be started: a command that is not found, not executable, a
// missing Dir).
func Start(spec Spec) (*Child, error) {
	path, spec, err := check(spec)
	if err != nil {
		return nil, err
	}
	newCmd := func(cg *cgroup) *exec.Cmd {
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
		if cg != nil {
			// clone3(CLONE_INTO_CGROUP): the child is in its cgroup
			// before it runs a single instruction, so nothing it forks
			// can be missed.
			cmd.SysProcAttr.UseCgroupFD = true
			cmd.SysProcAttr.CgroupFD = cg.dirfd
		}
		if usable(os.Stdin) {
			cmd.Stdin = os.Stdin
		}
		return cmd
	}
	var pl plumbing
	var t *tail
	if spec.ScanStderr {
		t = newTail(spec.TailSize)
	}
	if err := pl.wire(spec, t); err != nil {
		pl.closeChildEnds()
		pl.abort()
		return nil, fmt.Errorf("starting %q: %w", spec.Argv[0], err)
	}
	var cg *cgroup
	if spec.Cgroups != nil {
		cg = spec.Cgroups.create()
	}
	c := &Child{done: make(chan struct{})}
	started := make(chan error, 1)
	go c.run(launch{newCmd: newCmd, pl: &pl, tail: t, drain: spec.DrainTimeout,
		cg: cg, cgroups: spec.Cgroups, reaper: spec.Reaper}, started)
	if err := <-started; err != nil {
		file := path
		if spec.Dir != "" && !filepath.IsAbs(file) {
			file = filepath.Join(spec.Dir, file)
		}
		if err = execFailure(spec.Argv[0], file, err); errors.Is(err, ErrNotFound) || errors.Is(err, ErrCannotExecute) {
			return nil, err // it names the command already
		}
		return nil, fmt.Errorf("starting %q: %w", spec.Argv[0], err)
	}
	return c, nil
}

// wire prepares the child's stdout and stderr.
func (p *plumbing) wire(spec Spec, t *tail) error {
	out, err := p.output(spec.Stdout, os.Stdout, nil)
	if err != nil {
		return err
	}
	errf, err := p.output(spec.Stderr, os.Stderr, t)
	if err != nil {
		return err
	}
	p.stdout, p.stderr = out, errf
	return nil
}

// connect hands the prepared streams to cmd.
func (p *plumbing) connect(cmd *exec.Cmd) {
	// Assign only real files: a nil *os.File in an io.Writer is not nil.
	if p.stdout != nil {
		cmd.Stdout = p.stdout
	}
	if p.stderr != nil {
		cmd.Stderr = p.stderr
	}
}

// launch is what the goroutine that starts and watches a child needs.
type launch struct {
	newCmd  func(cg *cgroup) *exec.Cmd
	pl      *plumbing
	tail    *tail
	drain   time.Duration
	cg      *cgroup  // the child's cgroup, or nil
	cgroups *Cgroups // where cg came from, or nil
	reaper  *Reaper  // registers the main process, or nil
}

// run starts the child and then watches it until it is gone, on one
// goroutine locked to its OS thread. Pdeathsig is sent when the thread that
// forked exits (golang/go#27505), so that thread must live as long as the
// child: the lock is held until the child is reaped. It is released then,
// not left for the goroutine's end, because a goroutine that returns
// locked takes its thread with it: the runtime would retire a thread per
// child and make a new one (a clone and its first wake-up) on the next
// start's path, which a crash loop pays on every restart. Forking leaves
// the thread's own state (signal mask, namespaces) as it was, so the
// thread is fit to run other goroutines.
func (c *Child) run(l launch, started chan<- error) {
	runtime.LockOSThread()
	cmd, cg, err := c.fork(l)
	l.pl.closeChildEnds()
	if err != nil {
		l.pl.abort()
		started <- err
		return
	}
	c.process, c.pid, c.cg = cmd.Process, cmd.Process.Pid, cg
	l.pl.start()
	started <- nil

	// Wait for the exit without reaping: the zombie keeps the pid, and so
	// the group id, from being reused while the rest of the group is
	// killed. A stray worker would otherwise keep its GPU memory.
	waitExited(c.pid)
	killGroup(c.pid) // best effort: nothing can be done about a failure here
	var removed chan struct{}
	if c.cg != nil {
		// The cgroup also holds what left the group (setsid). Removing
		// it waits for the kill to finish, beside the output drain.
		c.cg.kill()
		removed = make(chan struct{})
		go func() {
			defer close(removed)
			l.cgroups.retire(c.cg, l.drain)
		}()
	}
	c.reaped()
	cmd.Wait()               // the status is read from ProcessState; a non-zero exit is not an error here
	runtime.UnlockOSThread() // nothing left for Pdeathsig to kill
	if l.reaper != nil {
		l.reaper.release(c.pid)
	}
	l.pl.drain(l.drain)
	if removed != nil {
		<-removed
	}
	var stderr []byte
	if l.tail != nil {
		stderr = l.tail.Bytes()
	}
	c.exit = exitOf(cmd.ProcessState, stderr)
	close(c.done)
}

// fork starts the child, in its cgroup when it has one. When only the
// start in the cgroup fails (no clone3, no write access to the cgroup.procs
// of the common ancestor, a cgroup with controllers in the way), cgroups
// are disabled and the child runs without: the process group still
// applies.
func (c *Child) fork(l launch) (*exec.Cmd, *cgroup, error) {
	cmd, err := c.forkOnce(l, l.cg)
	if err == nil || l.cg == nil {
		return cmd, l.cg, err
	}
	if l.cg.remove(0) != nil {
		l.cgroups.leftBehind()
	}
	cmd, err2 := c.forkOnce(l, nil)
	if err2 != nil {
		return nil, nil, err2 // not the cgroup's fault
	}
	l.cgroups.disable(fmt.Errorf("starting a child in %s: %w", l.cg.path, err))
	return cmd, nil, nil
}

func (c *Child) forkOnce(l launch, cg *cgroup) (*exec.Cmd, error) {
	cmd := l.newCmd(cg)
	l.pl.connect(cmd)
	var err error
	start := func() int {
		if err = cmd.Start(); err != nil {
			return 0
		}
		return cmd.Process.Pid
	}
	if l.reaper != nil {
		l.reaper.fork(start)
	} else {
		start()
	}
	if cg != nil {
		cg.closeDir()
	}
	return cmd, err
}

// waitExited blocks until process pid has exited, leaving it unreaped.
//
// It waits in the runtime's poller on a pidfd, which turns readable when
// the process exits, rather than in a blocking waitid(2): the goroutine
// that waits is locked to its thread (see run), and a thread blocked in a
// system call keeps its P, with whatever that goroutine readied just
// before queued behind it (the launching loop, woken by started), until
// sysmon takes the P back, up to 10 ms later. Parked in the poller, the
// goroutine gives its P up at once. Without pidfds (Linux before 5.3, or
// a pidfd the poller does not take) it falls back on waitid.
func waitExited(pid int) {
	if waitExitedPolled(pid) == nil {
		return
	}
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return // done, or not our child any more: Wait reports it
		}
	}
}

// waitExitedPolled waits for pid's exit on a pidfd in the poller. An error
// means it could not wait that way (and did not).
func waitExitedPolled(pid int) error {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var werr error
	err = rc.Read(func(fd uintptr) bool {
		var info unix.Siginfo
		for {
			werr = unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOWAIT|unix.WNOHANG, nil)
			if !errors.Is(werr, unix.EINTR) {
				break
			}
		}
		// Not exited yet (WNOHANG found nothing): wait for readable.
		return werr != nil || info.Signo != 0
	})
	if err != nil {
		return err
	}
	if werr != nil && !errors.Is(werr, unix.ECHILD) {
		return werr // let waitid say it the usual way
	}
	return nil
}
