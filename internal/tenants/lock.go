package tenants

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpuguard/gpuguard/internal/regfile"
)

// LockWait bounds how long a reservation waits for a GPU's admission lock.
// A holder that was SIGSTOPped mid-reservation keeps its flock (the kernel
// releases it only on death), so the wait must end.
const LockWait = 500 * time.Millisecond

// ErrLockHeld is returned when a GPU's admission lock stayed held for
// LockWait: a tenant is deciding a reservation and does not finish.
var ErrLockHeld = errors.New("held by a tenant that does not answer")

// lockFile takes an exclusive flock on path, retrying a non-blocking flock
// with a short backoff (a blocking flock could not be given up). The lock
// is the open file: closing it, or the holder's death, releases it.
func lockFile(ctx context.Context, path string, wait time.Duration) (*os.File, error) {
	f, err := openLock(path)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", filepath.Base(path), err)
	}
	deadline := time.Now().Add(wait)
	delay := 100 * time.Microsecond
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", filepath.Base(path), err)
		}
		left := time.Until(deadline)
		if left <= 0 {
			f.Close()
			return nil, ErrLockHeld
		}
		t := time.NewTimer(min(delay, left))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			f.Close()
			return nil, ctx.Err()
		}
		delay = min(2*delay, 10*time.Millisecond)
	}
}

// openLock opens (creating) the lock file at path, never blocking and never
// through a symlink. Whatever else is found there (a FIFO, a link, a
// device) no tenant can have locked, and it would stop every decision of
// the GPU for good: it is removed and the lock file made anew, once.
func openLock(path string) (*os.File, error) {
	f, err := regfile.OpenNoFollow(path, os.O_RDWR|os.O_CREATE, 0o600)
	if errors.Is(err, regfile.ErrNotRegular) {
		if rerr := os.Remove(path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			return nil, err
		}
		f, err = regfile.OpenNoFollow(path, os.O_RDWR|os.O_CREATE, 0o600)
	}
	return f, err
}
