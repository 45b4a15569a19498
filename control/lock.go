package control

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrAlreadyRunning is matched (errors.Is) by the error Listen returns when
// another live process holds the instance's lock.
var ErrAlreadyRunning = errors.New("instance already running")

// AlreadyRunningError says which instance is running and, when its lock
// file says so, under which pid.
type AlreadyRunningError struct {
	Name string
	PID  int // 0 when unknown
}

func (e *AlreadyRunningError) Error() string {
	if e.PID == 0 {
		return fmt.Sprintf("instance %q is already running", e.Name)
	}
	return fmt.Sprintf("instance %q is already running (pid %d)", e.Name, e.PID)
}

// Is makes errors.Is(err, ErrAlreadyRunning) true.
func (e *AlreadyRunningError) Is(target error) bool { return target == ErrAlreadyRunning }

// acquireLock takes an exclusive, non-blocking flock on path and writes our
// pid into it. The lock file is removed by Close, so a process that opened
// the old file before the unlink could lock an orphaned inode; checking
// that path still names the locked inode (and retrying if not) closes that
// race.
func acquireLock(path, name string) (*os.File, error) {
	for range 10 {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("opening lock file: %w", err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			pid := readPID(f)
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, &AlreadyRunningError{Name: name, PID: pid}
			}
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		if !sameFile(f, path) {
			f.Close()
			continue
		}
		if err := writePID(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("writing lock file %s: %w", path, err)
		}
		return f, nil
	}
	return nil, fmt.Errorf("locking %s: the file keeps being replaced", path)
}

func sameFile(f *os.File, path string) bool {
	var a, b unix.Stat_t
	if unix.Fstat(int(f.Fd()), &a) != nil || unix.Stat(path, &b) != nil {
		return false
	}
	return a.Dev == b.Dev && a.Ino == b.Ino
}

func writePID(f *os.File) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return err
}

// readPID is best effort: the holder may not have written its pid yet.
func readPID(f *os.File) int {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// lockPID reads the pid recorded in a lock file, for display only.
func lockPID(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	return readPID(f)
}
