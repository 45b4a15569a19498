package control

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
)

// maxSocketPath is the longest path bind(2) accepts for a Unix socket
// (sun_path is 108 bytes including the terminating NUL).
const maxSocketPath = 107

// ensureDir makes dir exist as a private directory. A dir we create is
// chmodded to 0700 whatever the umask. An existing one must belong to us or
// root and must not be writable by group or others: anyone who can write
// there could swap our socket for theirs. We refuse rather than chmod it,
// because it may be shared (--runtime-dir /tmp) and not ours to change.
func ensureDir(dir string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("creating runtime dir: %w", err)
		}
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("creating runtime dir: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("runtime dir: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("runtime dir %s is not a directory", dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() && st.Uid != 0 {
		return fmt.Errorf("runtime dir %s belongs to uid %d, not to us (uid %d)", dir, st.Uid, os.Geteuid())
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("runtime dir %s is writable by group or others (mode %04o); use a private dir (chmod 0700) or --runtime-dir", dir, fi.Mode().Perm())
	}
	return nil
}

// bindPrivate listens on path with mode 0600 without a moment where the
// socket has a wider mode at a reachable path: it binds inside a fresh
// 0700 subdirectory (mkdir's mode can only be narrowed by the umask),
// chmods, then renames into place. The rename also atomically replaces a
// stale socket left by a dead instance, which is safe because our caller
// holds the instance lock.
func bindPrivate(dir, path string) (*net.UnixListener, error) {
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("socket path %s is %d bytes, over the %d-byte limit of Unix sockets; use a shorter runtime dir", path, len(path), maxSocketPath)
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	tmpDir := filepath.Join(dir, ".b"+hex.EncodeToString(rnd[:]))
	tmp := filepath.Join(tmpDir, "s")
	if len(tmp) > maxSocketPath {
		// Only for very short names in a very long dir: bind in place.
		// ensureDir has refused dirs others can write to, but a dir others
		// can traverse would expose the socket until the chmod.
		if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm()&0o077 != 0 {
			return nil, fmt.Errorf("socket path %s: runtime dir too long to bind privately; use a shorter or 0700 runtime dir", path)
		}
		tmpDir, tmp = "", path
	} else {
		if err := os.Mkdir(tmpDir, 0o700); err != nil {
			return nil, bindError(path, err)
		}
		defer os.RemoveAll(tmpDir)
	}
	if tmpDir == "" {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("removing stale socket: %w", err)
		}
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, bindError(path, err)
	}
	// The listener must never unlink by its bind path: after the rename
	// that path is gone, and the real one is removed by Close.
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(tmp, 0o600); err != nil {
		ln.Close()
		return nil, bindError(path, err)
	}
	if tmp != path {
		if err := os.Rename(tmp, path); err != nil {
			ln.Close()
			return nil, bindError(path, err)
		}
	}
	return ln, nil
}

// bindError names the socket's real path and what went wrong, leaving out
// the temporary bind path inside the error (a name the user never gave,
// gone by the time they read it).
func bindError(path string, err error) error {
	var op *net.OpError
	if errors.As(err, &op) {
		err = op.Err
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		err = le.Err
	}
	return fmt.Errorf("binding socket %s: %w", path, err)
}
