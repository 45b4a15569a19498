package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Reaper makes gpuguard a child subreaper (PR_SET_CHILD_SUBREAPER), so a
// process orphaned anywhere below a child (a daemon that double-forked, a
// worker whose parent died) is re-parented to gpuguard rather than to
// init, and it reaps those orphans once they exit. As PID 1 (in a
// container) gpuguard is everyone's reaper anyway, and the same code reaps
// whatever the container's other processes orphan.
//
// Reaping must never take an exit status somebody else waits for: Start
// waits for its child's main process by pid, and os/exec (the npu-smi
// backend) for its own commands. So the Reaper never reaps with wait(-1)
// (it only peeks with WNOWAIT, zombieWaiting). On SIGCHLD it lists
// gpuguard's children and reaps only zombies that
//
//   - are not a main process started through this Reaper (the fork and
//     the registration happen under one lock, so none is missed), and
//   - are not in gpuguard's own process group: os/exec's commands inherit
//     it, while every child of Start leads its own group, and an orphan
//     from below it is in that group or one it made (setsid).
type Reaper struct {
	self, pgid int
	pid1       bool

	mu   sync.Mutex   // held while forking: a new pid is registered before a scan can see it
	mine map[int]bool // main processes whose status Start's waiter takes

	sigs   chan os.Signal
	kick   chan struct{}
	stop   chan struct{}
	done   chan struct{}
	reaped atomic.Int64
}

// NewReaper makes the process a child subreaper and starts reaping. Close
// undoes both.
func NewReaper() (*Reaper, error) {
	r := &Reaper{
		self: os.Getpid(), pgid: syscall.Getpgrp(), mine: make(map[int]bool),
		sigs: make(chan os.Signal, 1), kick: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	r.pid1 = r.self == 1
	// The scan reads /proc; one mounted for another pid namespace (a
	// container that did not remount it) names other processes by the
	// same numbers, and reaping by them could take a stranger's status.
	if self, err := os.Readlink("/proc/self"); err != nil || self != strconv.Itoa(r.self) {
		return nil, fmt.Errorf("cannot reap orphans: /proc is not mounted for gpuguard's pid namespace (/proc/self is %q, pid %d)", self, r.self)
	}
	if !r.pid1 {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			return nil, fmt.Errorf("becoming a child subreaper: %w", err)
		}
	}
	signal.Notify(r.sigs, syscall.SIGCHLD)
	go r.loop()
	r.Kick() // zombies from before we listened
	return r, nil
}

// Close stops reaping and, unless gpuguard is PID 1, stops being a
// subreaper. Orphans re-parented before that stay gpuguard's children.
func (r *Reaper) Close() error {
	signal.Stop(r.sigs)
	close(r.stop)
	<-r.done
	if !r.pid1 {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0); err != nil {
			return fmt.Errorf("ending child subreaper: %w", err)
		}
	}
	return nil
}

// Reaped is how many orphans have been reaped so far.
func (r *Reaper) Reaped() int { return int(r.reaped.Load()) }

// Kick asks for a scan now, as a SIGCHLD would.
func (r *Reaper) Kick() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// fork runs start, which forks a main process and returns its pid (0 when
// it failed), with scans held off, and registers the pid.
func (r *Reaper) fork(start func() int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if pid := start(); pid > 0 {
		r.mine[pid] = true
	}
}

// release unregisters pid once its waiter has reaped it.
func (r *Reaper) release(pid int) {
	r.mu.Lock()
	delete(r.mine, pid)
	r.mu.Unlock()
	r.Kick() // an orphan's SIGCHLD may have been skipped meanwhile
}

func (r *Reaper) loop() {
	defer close(r.done)
	for {
		select {
		case <-r.stop:
			return
		case <-r.sigs:
		case <-r.kick:
		}
		r.scan()
	}
}

// scan reaps every zombie child that is nobody else's.
func (r *Reaper) scan() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.zombieWaiting() {
		return
	}
	buf := make([]byte, 512)
	for _, pid := range r.children() {
		if r.mine[pid] {
			continue
		}
		state, pgrp, err := readStatePgrp(filepath.Join("/proc", strconv.Itoa(pid), "stat"), buf)
		if err != nil || state != 'Z' || pgrp == r.pgid {
			continue
		}
		var info unix.Siginfo
		for {
			err = unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG, nil)
			if !errors.Is(err, unix.EINTR) {
				break
			}
		}
		if err == nil {
			r.reaped.Add(1)
		}
	}
}

// zombieWaiting reports whether a child of the process that is not one
// of mine has exited and not been reaped, without reaping it (WNOWAIT).
// Most scans are for a restart's exit: its SIGCHLD, while the main
// process waits for its own waiter (mine), and the kick when the waiter
// lets it go (gone). This one call spares them the walk of /proc (two
// system calls a thread), which runs on the way from one child's exit to
// the next child's start. waitid names one waitable child only: when that
// is mine, others may wait behind it, and the kick of its release
// (release) scans again for them; no orphan is reaped but by the Reaper,
// so none is lost meanwhile. On an error other than "no children" it says
// yes, so that the walk decides. r.mu is held.
func (r *Reaper) zombieWaiting() bool {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT|unix.WALL, nil)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ECHILD):
			return false
		case err != nil:
			return true
		}
		// WNOHANG: zeroed when no child has exited.
		return info.Signo != 0 && !r.mine[siginfoPid(&info)]
	}
}

// siginfoPid is a waitid result's si_pid. x/sys/unix leaves siginfo's
// union opaque; si_pid opens it, after the three ints of the preamble
// padded to a pointer's alignment (__ARCH_SI_PREAMBLE_SIZE).
func siginfoPid(info *unix.Siginfo) int {
	const align = unsafe.Alignof(uintptr(0))
	const preamble = (3*unsafe.Sizeof(int32(0)) + align - 1) &^ (align - 1)
	return int(*(*int32)(unsafe.Add(unsafe.Pointer(info), preamble)))
}

// children lists the process's children: from each thread's children file
// where the kernel has them (CONFIG_PROC_CHILDREN; a child is listed under
// the thread that forked it, an adopted orphan under the one that adopted
// it), else by reading every process's parent.
func (r *Reaper) children() []int {
	tasks, err := os.ReadDir("/proc/self/task")
	if err == nil {
		var pids []int
		ok := true
		buf := make([]byte, 0, 512)
		for _, t := range tasks {
			b, err := readSmall(filepath.Join("/proc/self/task", t.Name(), "children"), buf)
			if errors.Is(err, os.ErrNotExist) {
				if _, serr := os.Stat(filepath.Join("/proc/self/task", t.Name())); serr != nil {
					continue // the thread exited
				}
				ok = false // no CONFIG_PROC_CHILDREN
				break
			}
			for _, f := range bytes.Fields(b) {
				if p, err := strconv.Atoi(string(f)); err == nil {
					pids = append(pids, p)
				}
			}
		}
		if ok {
			return pids
		}
	}
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	var pids []int
	buf := make([]byte, 512)
	for _, name := range names {
		p, err := strconv.Atoi(name)
		if err != nil || p <= 0 {
			continue
		}
		if ppid, err := readPPID("/proc/"+name+"/stat", buf); err == nil && ppid == r.self {
			pids = append(pids, p)
		}
	}
	return pids
}

// readSmall reads the whole of a small /proc file into buf (grown as
// needed) with plain system calls: open, read to the end, close.
// os.ReadFile makes three times as many on procfs (it tries the poller:
// fcntl, epoll_ctl, fcntl again, fstat), and a scan, which runs after
// every child's exit, reads one such file per thread of gpuguard.
func readSmall(path string, buf []byte) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	buf = buf[:0]
	for {
		buf = slices.Grow(buf, 512)
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		case n == 0:
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

// readStatePgrp reads the state (field 3) and process group (field 5) of a
// /proc/<pid>/stat file.
func readStatePgrp(path string, buf []byte) (byte, int, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, 0, err
	}
	n, err := unix.Read(fd, buf)
	unix.Close(fd)
	if err != nil {
		return 0, 0, err
	}
	return parseStatePgrp(buf[:n])
}

// parseStatePgrp extracts the state and process group from the text of
// /proc/<pid>/stat ("pid (comm) state ppid pgrp ..."), counting fields from
// the last ')' as parsePPID does.
func parseStatePgrp(stat []byte) (byte, int, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0, errors.New("malformed stat: no command name")
	}
	f := bytes.Fields(stat[i+1:])
	if len(f) < 3 || len(f[0]) != 1 {
		return 0, 0, errors.New("malformed stat: too few fields")
	}
	pgrp, err := strconv.Atoi(string(f[2]))
	if err != nil {
		return 0, 0, fmt.Errorf("malformed stat: process group: %w", err)
	}
	return f[0][0], pgrp, nil
}
