package statefile

import (
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"golang.org/x/sys/unix"
)

// staleAfter is the age from which a temp file is taken for the leftover
// of a crashed write rather than a write in progress.
const staleAfter = time.Minute

// replace atomically replaces path with a 0600 file holding data. It
// removes what crashed writes left behind first when sweep is set.
//
// It speaks to the kernel directly: four system calls (open, write,
// close, rename). Through os.CreateTemp and os.Rename the same write took
// thirteen: the dir listing of the sweep, the poller's tries on a regular
// file (two fcntl pairs, an epoll_ctl that fails), and the Lstat with
// which os.Rename guards against a directory (rename(2) refuses one
// anyway). A restart writes the file before its fork, so each of them sat
// in the restart gap.
func replace(path string, data []byte, sweep, hold bool) error {
	dir, base := filepath.Dir(path), filepath.Base(path)
	prefix := "." + base + ".tmp-"
	if sweep {
		removeStale(dir, prefix)
	}
	// 0600 and exclusive; a dot name keeps it out of globs. The same
	// directory makes the rename atomic.
	tmp, fd, err := createTemp(dir, prefix)
	if err != nil {
		return err
	}
	err = writeAll(fd, data)
	// No fsync, of the file or the directory: readers need only the
	// rename's atomicity, and after a host crash gpuguard writes the file
	// anew before it starts a child, so durability would buy nothing. Two
	// fsyncs cost 0.6 ms (up to 25 ms) between a decision and the signal.
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	if err == nil {
		old := holdOld(path, hold)
		err = unix.Rename(tmp, path)
		if old >= 0 {
			go unix.Close(old) // the replaced file's inode is freed here
		}
	}
	if err != nil {
		unix.Unlink(tmp)
		return &fs.PathError{Op: "replace", Path: path, Err: err}
	}
	return nil
}

// holdOld opens the file that path names, without following a link, and
// returns the descriptor, or -1 (hold unset, or nothing there). A rename
// over a file whose last link it is frees that inode within the rename,
// on ext4 0.1 ms or more (the figure grows with what other jobs create and
// delete); holding it open leaves the freeing to the last close, which
// replace makes off the caller's goroutine: the write before a fork does
// not wait for it.
func holdOld(path string, hold bool) int {
	if !hold {
		return -1
	}
	fd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	return fd
}

// createTemp makes a new 0600 file prefix<random> in dir, as
// os.CreateTemp does, and returns its path and descriptor.
func createTemp(dir, prefix string) (string, int, error) {
	for try := 0; ; try++ {
		name := filepath.Join(dir, prefix+strconv.FormatUint(uint64(rand.Uint32()), 10))
		fd, err := unix.Open(name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o600)
		if err == nil {
			return name, fd, nil
		}
		if !errors.Is(err, unix.EEXIST) || try >= 100 {
			return "", -1, &fs.PathError{Op: "create", Path: name, Err: err}
		}
	}
}

// writeAll writes data to fd, all of it.
func writeAll(fd int, data []byte) error {
	for len(data) > 0 {
		n, err := unix.Write(fd, data)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// removeStale removes temp files that crashed writes left behind, so they
// do not pile up in the state dir. Only old ones: a fresh one may belong to
// a write in progress. Failures are harmless and ignored.
func removeStale(dir, prefix string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) || !e.Type().IsRegular() {
			continue
		}
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > staleAfter {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// Writer writes one instance's state file, the replaced file freed off
// the caller's goroutine (holdOld). It sweeps the leftovers of crashed
// writes at its first write only: a write that fails removes its
// own temp file, so only a process that died mid-write leaves one, and
// the next instance's first write takes it. Write, which sweeps every
// time, lists the state dir once a write, before every start. Its methods
// are safe for concurrent use.
type Writer struct {
	swept sync.Once
}

// Write replaces the state file at path with st, as Write does.
func (w *Writer) Write(path string, st api.ProfileState) error {
	sweep := false
	w.swept.Do(func() { sweep = true })
	return write(path, st, sweep, true)
}
