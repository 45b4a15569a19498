package control

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// SweepStale removes in's socket when its instance is gone: nobody holds
// the instance lock <dir>/<name>.lock, which every running instance holds
// from before it binds its socket until after it removes it. A killed
// instance (SIGKILL, OOM killer) leaves both files behind, and without the
// sweep `status` listed it as unreachable for ever. A lock that is held
// means a live instance that does not answer (hung, or starting): that is
// left alone. It reports whether it removed the socket.
//
// The sweep holds the lock for as long as two unlinks take, so a new
// instance of the same name starting in exactly that moment is told that
// one is already running; it is never the other way round (a live
// instance's socket removed).
func SweepStale(in Instance) (bool, error) {
	lockPath := filepath.Join(in.Dir, in.Name+".lock")
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return false, fmt.Errorf("opening lock file: %w", err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return false, nil // a live instance holds it
		}
		return false, fmt.Errorf("locking %s: %w", lockPath, err)
	}
	if !sameFile(f, lockPath) {
		return false, nil // replaced meanwhile: an instance is starting
	}
	if err := os.Remove(in.Socket); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("removing stale socket: %w", err)
	}
	// Unlink while still locked, as Server.Close does.
	if err := os.Remove(lockPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return true, fmt.Errorf("removing stale lock file: %w", err)
	}
	return true, nil
}
