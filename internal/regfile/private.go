package regfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrTooLarge is the error (inside a *fs.PathError) for a file longer than
// ReadSmall's limit: a sparse 8 GiB file, or one that keeps growing.
var ErrTooLarge = errors.New("file too large")

// OpenNoFollow is Open that also refuses a symlink (O_NOFOLLOW): in a
// directory others may have touched (the runtime dir, a state dir), a link
// would make gpuguard read or write a file it was never given, or read
// /dev/zero for ever.
func OpenNoFollow(path string, flag int, perm fs.FileMode) (*os.File, error) {
	f, err := Open(path, flag|syscall.O_NOFOLLOW, perm)
	if errors.Is(err, syscall.ELOOP) {
		return nil, &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w (a symlink)", ErrNotRegular)}
	}
	return f, err
}

// ReadSmall reads the regular file at path, never through a symlink and
// never blocking in open, and refuses one longer than max bytes without
// reading it: a file's cost in memory is bounded by max whatever it is.
func ReadSmall(path string, max int64) ([]byte, error) {
	f, err := OpenNoFollow(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > max {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w (%d bytes, at most %d)", ErrTooLarge, st.Size(), max)}
	}
	// The size can change under us: read one byte past max to tell.
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w (more than %d bytes)", ErrTooLarge, max)}
	}
	return b, nil
}
