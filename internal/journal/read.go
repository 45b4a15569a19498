package journal

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/regfile"
)

// Read returns the events at or after since from the journal at path and its
// rotated files, oldest first. Lines that do not parse as an event (a torn
// last line after a crash, a line being written right now, garbage) are
// skipped and counted, never fatal. Rotation racing the read can repeat or
// miss a file's worth of events; that is the price of not locking the
// writer. It fails with an error wrapping fs.ErrNotExist when there is no
// journal at all.
func Read(path string, since time.Time) (events []api.Event, skipped int, err error) {
	files, err := journalFiles(path)
	if err != nil {
		return nil, 0, err
	}
	for _, name := range files {
		evs, n, err := readFile(name, since)
		if errors.Is(err, fs.ErrNotExist) {
			continue // rotated away since it was listed
		}
		if err != nil {
			return events, skipped, err
		}
		events = append(events, evs...)
		skipped += n
	}
	return events, skipped, nil
}

// journalFiles lists path.N (highest N, the oldest, first) then path.
func journalFiles(path string) ([]string, error) {
	matches, err := filepath.Glob(globEscape(path) + ".*")
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", path, err)
	}
	var files []string
	for _, g := range slices.Backward(generations(path, matches)) {
		files = append(files, g.name)
	}
	if _, err := os.Stat(path); err == nil {
		files = append(files, path)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading the journal: %w", err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("reading the journal: %w", &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist})
	}
	return files, nil
}

func readFile(name string, since time.Time) ([]api.Event, int, error) {
	f, err := regfile.Open(name, os.O_RDONLY, 0) // a FIFO would hold report for ever
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	// Every event in a file was written before the file's last change, so
	// an old rotated file need not be parsed at all.
	if st, err := f.Stat(); err == nil && !since.IsZero() && st.ModTime().Before(since) {
		return nil, 0, nil
	}
	var (
		events  []api.Event
		skipped int
	)
	r := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			ev, ok := parseLine(line, err == nil)
			switch {
			case !ok:
				skipped++
			case ev == nil, ev.Time.Before(since):
			default:
				events = append(events, *ev)
			}
		}
		if err == io.EOF {
			return events, skipped, nil
		}
		if err != nil {
			return events, skipped, fmt.Errorf("reading %s: %w", name, err)
		}
	}
}

// parseLine decodes one line. complete says the line ended in a newline; a
// line without one is torn (or still being written) and does not count as
// an event even if it happens to parse. Blank lines (the writer ends a torn
// fragment with one) are neither events nor errors: ev is nil, ok true.
func parseLine(line []byte, complete bool) (ev *api.Event, ok bool) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil, true
	}
	if !complete {
		return nil, false
	}
	var e api.Event
	if err := json.Unmarshal(line, &e); err != nil || e.Event == "" || e.Time.IsZero() {
		return nil, false
	}
	return &e, true
}
