package journal

import (
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/gpuguard/gpuguard/internal/regfile"
)

// file is what the journal writes to: an *os.File, or a fake in tests.
type file interface {
	io.Writer
	io.Closer
}

// fsys is every file operation the writer makes. The real one is osFS;
// tests use an in-memory one whose modification times follow the test's
// clock, so retention by age runs under testing/synctest.
type fsys interface {
	// OpenAppend opens path for appending (creating it 0600) and returns
	// its size.
	OpenAppend(path string) (file, int64, error)
	Rename(from, to string) error
	Remove(path string) error
	// ModTime is when path was last written.
	ModTime(path string) (time.Time, error)
	// Glob lists the names matching pattern (filepath.Match syntax).
	Glob(pattern string) ([]string, error)
}

// osFS is the real file system.
type osFS struct{}

func (osFS) OpenAppend(path string) (file, int64, error) {
	// A FIFO here would hold the start, and then the last flush and so
	// gpuguard's exit, on whoever reads it; a symlink would make gpuguard
	// append wherever it points, as whoever gpuguard runs as.
	f, err := regfile.OpenNoFollow(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, st.Size(), nil
}

func (osFS) Rename(from, to string) error { return os.Rename(from, to) }
func (osFS) Remove(path string) error     { return os.Remove(path) }

func (osFS) ModTime(path string) (time.Time, error) {
	st, err := os.Stat(path)
	if err != nil {
		return time.Time{}, err
	}
	return st.ModTime(), nil
}

func (osFS) Glob(pattern string) ([]string, error) { return filepath.Glob(pattern) }
