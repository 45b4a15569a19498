// Package regfile opens files that must be regular files (the journal, the
// simulated GPU's files) without ever blocking in open(2). A FIFO left
// where such a file belongs blocks an ordinary open until a peer opens its
// other end, which may be never, and a read or write on it until the peer
// acts: gpuguard's start, its exit (the journal's last flush), `report`
// and every simulated sample would wait on a stranger.
package regfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular is the error (inside a *fs.PathError) for a path that
// names a FIFO, a device or a socket.
var ErrNotRegular = errors.New("not a regular file")

// Open is os.OpenFile for a path that must be a regular file: it opens
// with O_NONBLOCK, which never waits for a FIFO's peer (and has no effect
// on a regular file), and refuses whatever is not a regular file.
func Open(path string, flag int, perm fs.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NONBLOCK, perm)
	if errors.Is(err, syscall.ENXIO) { // a FIFO without reader, opened to write; or a socket
		return nil, notRegular(path)
	}
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w (%s)", ErrNotRegular, kind(st.Mode()))}
	}
	return f, nil
}

// notRegular is the error for path, whose open failed with ENXIO, naming
// what it is, as Open does for what opens: the journal's writer meets a
// FIFO this way, its reader only after the open.
func notRegular(path string) error {
	why := ErrNotRegular
	if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() {
		why = fmt.Errorf("%w (%s)", ErrNotRegular, kind(st.Mode()))
	}
	return &fs.PathError{Op: "open", Path: path, Err: why}
}

// kind names a non-regular file's type.
func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a directory"
	}
	return m.Type().String()
}
