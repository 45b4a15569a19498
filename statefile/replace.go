package statefile

import (
	"github.com/gpuguard/gpuguard/internal/durable"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// staleAfter is the age from which a temp file is taken for the leftover
// of a crashed write rather than a write in progress.
const staleAfter = time.Minute

// replace atomically replaces path with a 0600 file holding data.
func replace(path string, data []byte) (err error) {
	dir, base := filepath.Dir(path), filepath.Base(path)
	prefix := "." + base + ".tmp-"
	removeStale(dir, prefix)
	// CreateTemp makes the file 0600 and exclusive; a dot name keeps it
	// out of globs. The same directory makes the rename atomic.
	f, err := os.CreateTemp(dir, prefix+"*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err := f.Write(data); err != nil {
		return err
	}
	// Without the fsync a crash after the rename can leave an empty file
	// under the final name on some filesystems (ext4 delalloc, xfs).
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	return durable.SyncDir(dir)
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
