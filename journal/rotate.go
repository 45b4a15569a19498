package journal

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// rotated is the name of the n-th rotated file (1 = newest).
func rotated(path string, n int) string { return fmt.Sprintf("%s.%d", path, n) }

// rotate closes the current file, shifts events.jsonl.N up by one (dropping
// the oldest beyond Keep), moves the current file to .1 and opens a fresh
// one. If any step fails the journal is left without a file; the next
// event reopens it and, finding it still too big, rotates again.
func (j *Journal) rotate() error {
	err := j.f.Close()
	j.f = nil
	if err != nil {
		return fmt.Errorf("closing %s for rotation: %w", j.path, err)
	}
	if err := j.shift(); err != nil {
		return err
	}
	return j.reopen()
}

func (j *Journal) reopen() error {
	f, size, err := j.open(j.path)
	if err != nil {
		return fmt.Errorf("reopening the journal: %w", err)
	}
	// A fragment left by a failed write still needs ending unless the
	// file is a fresh one.
	j.f, j.size, j.torn = f, size, j.torn && size > 0
	return nil
}

func (j *Journal) shift() error {
	keep := j.opts.Keep
	if err := removeIfExists(rotated(j.path, keep+1)); err != nil {
		return err
	}
	if keep == 0 {
		return removeIfExists(j.path)
	}
	for n := keep; n >= 1; n-- {
		from := rotated(j.path, n-1)
		if n == 1 {
			from = j.path
		}
		if err := os.Rename(from, rotated(j.path, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("rotating the journal: %w", err)
		}
	}
	return nil
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("rotating the journal: %w", err)
	}
	return nil
}
