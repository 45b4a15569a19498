package journal

import (
	"io/fs"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"
)

// memFS is an in-memory fsys. Modification times come from time.Now, so
// under testing/synctest they follow the bubble's clock.
type memFS struct {
	mu    sync.Mutex
	files map[string]*memFile
}

// memFile is one file's content (the inode: a handle keeps writing to it
// after a rename, as on a real file system). With fail set every write
// fails; with partial too, half the line is written first, as a full disk
// can. With gate set, every write waits until gate is closed (a disk that
// stalls).
type memFile struct {
	fs      *memFS
	data    []byte
	mod     time.Time
	fail    bool
	partial bool
	gate    chan struct{}
}

func newMemFS() *memFS { return &memFS{files: map[string]*memFile{}} }

func (m *memFS) OpenAppend(path string) (file, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f, ok := m.files[path]
	if !ok {
		f = &memFile{fs: m, mod: time.Now()}
		m.files[path] = f
	}
	return f, int64(len(f.data)), nil
}

func (m *memFS) Rename(from, to string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	f, ok := m.files[from]
	if !ok {
		return &fs.PathError{Op: "rename", Path: from, Err: fs.ErrNotExist}
	}
	delete(m.files, from)
	m.files[to] = f
	return nil
}

func (m *memFS) Remove(path string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.files[path]; !ok {
		return &fs.PathError{Op: "remove", Path: path, Err: fs.ErrNotExist}
	}
	delete(m.files, path)
	return nil
}

func (m *memFS) ModTime(path string) (time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f, ok := m.files[path]
	if !ok {
		return time.Time{}, &fs.PathError{Op: "stat", Path: path, Err: fs.ErrNotExist}
	}
	return f.mod, nil
}

func (m *memFS) Glob(pattern string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for name := range m.files {
		if ok, err := filepath.Match(pattern, name); err != nil {
			return nil, err
		} else if ok {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// names lists the files, sorted.
func (m *memFS) names() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for name := range m.files {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// file returns the content of path.
func (m *memFS) file(path string) *memFile {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.files[path]
}

func (f *memFile) Write(p []byte) (int, error) {
	if f.gate != nil {
		<-f.gate
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.fail {
		n := 0
		if f.partial {
			n = len(p) / 2
			f.data = append(f.data, p[:n]...)
		}
		return n, &fs.PathError{Op: "write", Path: "events.jsonl", Err: syscall.ENOSPC}
	}
	f.data = append(f.data, p...)
	f.mod = time.Now()
	return len(p), nil
}

func (f *memFile) Close() error { return nil }

func (f *memFile) set(fail bool) {
	f.fs.mu.Lock()
	f.fail = fail
	f.fs.mu.Unlock()
}

func (f *memFile) bytes() []byte {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return slices.Clone(f.data)
}
