package instances

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"path/filepath"
	"slices"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/journal"
	"github.com/gpuguard/gpuguard/internal/paths"
	"github.com/gpuguard/gpuguard/internal/report"
)

// ErrNoJournal is Summarize's error for a target without a journal.
var ErrNoJournal = errors.New("no such instance")

// JournalName is want if any event of the journal carries it (or none
// carries a name), else the name of its newest event that has one.
func JournalName(events []api.Event, want string) string {
	newest := ""
	for _, ev := range slices.Backward(events) {
		if ev.Name == want {
			return want
		}
		if newest == "" {
			newest = ev.Name
		}
	}
	if newest == "" {
		return want
	}
	return newest
}

// Summarize reads one instance's journal and summarises the window; the
// events read come back too, for the review page. A name the user gave
// that the journal never carries is noted on errOut.
func Summarize(t Target, runDirs []string, since, now time.Time, errOut io.Writer) (report.Summary, []api.Event, error) {
	path := filepath.Join(t.Dir, paths.JournalFile)
	events, skipped, err := journal.Read(path, time.Time{})
	if errors.Is(err, fs.ErrNotExist) {
		return report.Summary{}, nil, fmt.Errorf("%w: no journal at %s", ErrNoJournal, path)
	}
	if err != nil {
		return report.Summary{}, nil, err
	}
	// --state-dir can be any directory; the journal knows the name. A name
	// the user gave that the journal never carries is a mix-up (another
	// instance's --state-dir): the report says whose journal it is.
	name := t.Name
	if journaled := JournalName(events, t.Name); journaled != t.Name {
		if t.Named {
			fmt.Fprintf(errOut, "gpuguard: the journal at %s is instance %s's, not %s's: reporting it as %s\n", path, journaled, t.Name, journaled)
		}
		name = journaled
	}
	s := report.SummarizeSince(events, since, now, IsLive(runDirs, name))
	s.Name, s.SkippedLines = name, skipped
	return s, events, nil
}

// IsLive says whether the instance's control socket accepts connections.
// A socket file alone is not enough: a gpuguard killed with -9 leaves it
// behind. Package control is not needed for a connect.
func IsLive(runDirs []string, name string) bool {
	for _, d := range runDirs {
		conn, err := net.DialTimeout("unix", paths.Socket(d, name), 500*time.Millisecond)
		if err == nil {
			conn.Close()
			return true
		}
	}
	return false
}

// Read is one instance's summary and the events it was read from.
type Read struct {
	Summary report.Summary
	Events  []api.Event
}

// SummarizeAll summarises every target in turn (Summarize), each judged
// against budget, the degraded rate above which it is flagged. With
// noteSkipped, a journal's unreadable lines are noted on errOut: the text
// report notes them in its body, JSON and the review page have no place
// for it.
func SummarizeAll(targets []Target, runDirs []string, since, now time.Time, budget float64, noteSkipped bool, errOut io.Writer) ([]Read, error) {
	reads := make([]Read, 0, len(targets))
	for _, t := range targets {
		s, events, err := Summarize(t, runDirs, since, now, errOut)
		if err != nil {
			return nil, err
		}
		s.SetBudget(budget)
		if noteSkipped && s.SkippedLines > 0 {
			fmt.Fprintf(errOut, "gpuguard: %s: skipped %d unreadable journal line(s)\n", s.Name, s.SkippedLines)
		}
		reads = append(reads, Read{s, events})
	}
	return reads, nil
}
