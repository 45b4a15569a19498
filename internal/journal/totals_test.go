package journal

import (
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// countingTotals is a Totals that counts the lines it is given; its records
// carry that count as Events["lines"].
type countingTotals struct{ lines int }

func (c *countingTotals) Add(ev api.Event) { c.lines++ }

func (c *countingTotals) Record(now time.Time) api.Event {
	return api.Event{Time: now, Event: api.EventTotals, Totals: &api.Totals{Events: map[string]int{"lines": c.lines}}}
}

// TestTotalsRecords: a record is the run's first line, the first line of
// every file after a rotation, comes every RecordEvery, and ends the run at
// Close; each counts exactly the lines before it.
func TestTotalsRecords(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ct := &countingTotals{}
		j, m, path := openMem(t, Options{Limits: Limits{MaxBytes: 1000, MaxFiles: 100}, Totals: ct, Name: "llama"})
		start := time.Now()
		for i := range 3 {
			j.Observe(event(i))
		}
		time.Sleep(RecordEvery)
		j.Flush()
		for i := range 30 { // ~100-byte lines: several rotations
			j.Observe(event(i))
		}
		j.Close()

		var all []api.Event
		files := 0
		for n := 100; n >= 0; n-- {
			name := path
			if n > 0 {
				name = rotated(path, n)
			}
			if m.file(name) == nil {
				continue
			}
			files++
			evs := memEvents(t, m, name)
			if evs[0].Event != api.EventTotals {
				t.Errorf("%s begins with %q, not a totals record", filepath.Base(name), evs[0].Event)
			}
			all = append(all, evs...)
		}
		if files < 3 {
			t.Fatalf("only %d files: no rotation to test", files)
		}
		lines, records := 0, 0
		var times []time.Time
		for _, ev := range all {
			if ev.Event != api.EventTotals {
				lines++
				continue
			}
			records++
			times = append(times, ev.Time)
			if got := ev.Totals.Events["lines"]; got != lines {
				t.Errorf("record %d counts %d lines, %d came before it", records, got, lines)
			}
			if ev.Name != "llama" {
				t.Errorf("record without the instance name: %+v", ev)
			}
		}
		if records != files+2 { // each file's first, the periodic one, Close's
			t.Errorf("%d records in %d files, want %d", records, files, files+2)
		}
		if !times[0].Equal(start) || !times[1].Equal(start.Add(RecordEvery)) {
			t.Errorf("record times %v: want the open, then RecordEvery later", times[:2])
		}
		if last := all[len(all)-1]; last.Event != api.EventTotals || last.Totals.Events["lines"] != 33 {
			t.Errorf("the last line %+v is not Close's record of 33 lines", last)
		}
	})
}

// TestNoTotalsWithoutTally: without Options.Totals the journal holds only
// the events.
func TestNoTotalsWithoutTally(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j, m, path := openMem(t, Options{})
		j.Observe(event(1))
		time.Sleep(2 * RecordEvery)
		j.Close()
		if evs := memEvents(t, m, path); len(evs) != 1 || evs[0].PID != 1 {
			t.Errorf("lines %+v, want the one event", evs)
		}
	})
}

// firstRecordTotals notes when, and on which goroutine, its first record
// was asked for.
type firstRecordTotals struct {
	mu    sync.Mutex
	first time.Time
	by    string // goroutine
}

func (f *firstRecordTotals) Add(api.Event) {}

func (f *firstRecordTotals) Record(now time.Time) api.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.first.IsZero() {
		f.first, f.by = now, goroutine()
	}
	return api.Event{Time: now, Event: api.EventTotals, Totals: &api.Totals{}}
}

// TestFirstRecordAtOpen: the run's first record is timed when Open runs,
// not when the writer goroutine first gets to run: on a busy host (one
// scheduler P) that can be after the child's start was observed, and the
// run would then be accounted from the record, losing the time since.
func TestFirstRecordAtOpen(t *testing.T) {
	ft := &firstRecordTotals{}
	before := time.Now()
	j, _, _ := openMem(t, Options{Totals: ft})
	after := time.Now()
	ft.mu.Lock()
	first, by := ft.first, ft.by
	ft.mu.Unlock()
	j.Close()
	// The times alone pass whenever the writer happens to run before
	// Open returns; the goroutine tells whether Open itself asked.
	if me := goroutine(); by != me {
		t.Errorf("first record asked for on goroutine %s, want Open's caller's (%s), not the writer's", by, me)
	}
	if first.Before(before) || first.After(after) {
		t.Fatalf("first record at %s, want within Open (%s .. %s)", first.Format(time.RFC3339Nano),
			before.Format(time.RFC3339Nano), after.Format(time.RFC3339Nano))
	}
}

// goroutine is the calling goroutine's id, from its stack header
// ("goroutine 7 [running]:").
func goroutine() string {
	buf := make([]byte, 64)
	f := strings.Fields(string(buf[:runtime.Stack(buf, false)]))
	if len(f) < 2 {
		return ""
	}
	return f[1]
}
