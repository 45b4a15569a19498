package statefile

import (
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
	// No fsync, of the file or the directory: readers need only the
	// rename's atomicity, and after a host crash gpuguard writes the file
	// anew before it starts a child, so durability would buy nothing. Two
	// fsyncs cost 0.6 ms (up to 25 ms) between a decision and the signal.
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
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
