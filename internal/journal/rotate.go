package journal

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"time"
)

// MaxRetained is the most rotated files MaxAge can keep: past it the
// oldest go even when younger than MaxAge (and the journal logs that once),
// so a flood of lines fills at most (MaxRetained+1) × MaxBytes of disk.
const MaxRetained = 1000

// Why the journal rotates by itself rather than with
// gopkg.in/natefinch/lumberjack.v2 (v2.2.1), which rotates by size, count
// and age, but not by this journal's contract:
//   - it names rotated files by a timestamp (events-2006-01-02T15-04-05.000.jsonl),
//     while the contract, `report` and operators' scripts rely on
//     events.jsonl.1 (newest) .. .N;
//   - its MaxSize is in whole megabytes, while max_size goes down to 64 KiB;
//   - its MaxAge deletes files older than the age whatever MaxBackups says,
//     while max_age must keep files at least that long even past max_files
//     (the 180-day record), and its MaxBackups 0 keeps every file where
//     max_files = 0 keeps none;
//   - it deletes in a goroutine of its own that Close does not stop, so the
//     writer could not be tested leak-free or under testing/synctest, and it
//     cannot write a totals record as the first line of each new file.
// What it would have given (one Write per line, never split across files)
// is a few lines here: rotate before a line that would not fit.

// rotated is the name of the n-th rotated file (1 = newest).
func rotated(path string, n int) string { return fmt.Sprintf("%s.%d", path, n) }

// rotate closes the current file, applies retention while making it
// events.jsonl.1, and opens a fresh one. If any step fails the journal is
// left without a file; the next event reopens it and, finding it still too
// big, rotates again.
func (j *Journal) rotate(now time.Time) error {
	err := j.f.Close()
	j.f = nil
	if err != nil {
		return fmt.Errorf("closing %s for rotation: %w", j.path, err)
	}
	if err := j.retain(now, true); err != nil {
		return err
	}
	return j.reopen()
}

func (j *Journal) reopen() error {
	f, size, err := j.fs.OpenAppend(j.path)
	if err != nil {
		return fmt.Errorf("reopening the journal: %w", err)
	}
	// A fragment left by a failed write still needs ending unless the
	// file is a fresh one.
	j.f, j.size, j.torn = f, size, j.torn && size > 0
	return nil
}

// retain removes the rotated files the rule no longer keeps. With shift it
// is a rotation: the current file becomes .1 and every kept file moves one
// number up (highest first, so no rename overwrites a kept file).
func (j *Journal) retain(now time.Time, shift bool) error {
	matches, err := j.fs.Glob(globEscape(j.path) + ".*")
	if err != nil {
		return fmt.Errorf("listing the journal's rotated files: %w", err)
	}
	// The files as they will be numbered, newest first, and their ages.
	var (
		gens []gen
		ages []time.Duration
	)
	if shift {
		mt, err := j.fs.ModTime(j.path)
		if err != nil {
			return fmt.Errorf("rotating the journal: %w", err)
		}
		ages = append(ages, now.Sub(mt))
	}
	for _, g := range generations(j.path, matches) {
		mt, err := j.fs.ModTime(g.name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("rotating the journal: %w", err)
		}
		gens = append(gens, g)
		ages = append(ages, now.Sub(mt))
	}
	keep, capped := retained(ages, j.opts.MaxFiles, j.opts.MaxAge, j.opts.ceiling)
	if capped && !j.capWarned {
		j.capWarned = true
		j.opts.Logf("journal: more than %d rotated files are younger than max_age %s: the oldest are removed anyway (raise max_size to keep more)",
			j.opts.ceiling, j.opts.MaxAge)
	}
	off := len(ages) - len(gens) // 1 with shift: gens[i] becomes file i+1
	for i := len(gens) - 1; i >= 0 && i+off >= keep; i-- {
		if err := removeIfExists(j.fs, gens[i].name); err != nil {
			return err
		}
		gens = gens[:i]
	}
	if !shift {
		return nil
	}
	for _, g := range slices.Backward(gens) {
		if err := j.fs.Rename(g.name, rotated(j.path, g.n+1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("rotating the journal: %w", err)
		}
	}
	if keep == 0 {
		return removeIfExists(j.fs, j.path)
	}
	if err := j.fs.Rename(j.path, rotated(j.path, 1)); err != nil {
		return fmt.Errorf("rotating the journal: %w", err)
	}
	return nil
}

// retained is how many rotated files to keep, given their ages newest
// first: the first maxFiles, then, while maxAge > 0, each further file
// younger than maxAge, stopping at the first older one (a file is never
// younger than a newer one, so the kept files stay .1 .. .K without gaps).
// A file's age is the time since it was last written: its newest line's.
// So with max_age every line is kept at least max_age.
// MaxAge keeps at most max(maxFiles, ceiling) files; capped says that
// ceiling removed a file still younger than maxAge.
func retained(ages []time.Duration, maxFiles int, maxAge time.Duration, ceiling int) (keep int, capped bool) {
	limit := max(maxFiles, ceiling)
	keep = min(max(maxFiles, 0), len(ages))
	for maxAge > 0 && keep < len(ages) && ages[keep] < maxAge {
		if keep == limit {
			return keep, true
		}
		keep++
	}
	return keep, false
}

func removeIfExists(fsys fsys, path string) error {
	if err := fsys.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("rotating the journal: %w", err)
	}
	return nil
}

// gen is one rotated file, path.n.
type gen struct {
	n    int
	name string
}

// generations picks the rotated files (path.N, N >= 1) out of matches,
// newest (lowest N) first.
func generations(path string, matches []string) []gen {
	var gens []gen
	for _, m := range matches {
		n, err := strconv.Atoi(strings.TrimPrefix(m, path+"."))
		if err == nil && n > 0 && m == rotated(path, n) {
			gens = append(gens, gen{n, m})
		}
	}
	slices.SortFunc(gens, func(a, b gen) int { return a.n - b.n })
	return gens
}

// globEscape quotes the glob metacharacters a state dir might contain.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
