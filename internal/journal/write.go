package journal

import (
	"fmt"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/jsonline"
)

// append writes one event as one line with one Write call. When the line
// opens a fresh file (after a rotation), a totals record goes first, so
// every file begins with the run's figures so far.
func (j *Journal) append(ev api.Event) {
	line, err := jsonline.Marshal(ev)
	if err != nil {
		j.fail(fmt.Errorf("encoding a %s event: %w", ev.Event, err))
		return
	}
	if int64(len(line))+2 > j.opts.MaxBytes {
		j.fail(fmt.Errorf("a %s event of %d bytes exceeds the journal's max size %d", ev.Event, len(line)+1, j.opts.MaxBytes))
		return
	}
	if err := j.ready(int64(len(line)) + 2); err != nil {
		j.fail(err)
		return
	}
	if j.size == 0 && j.opts.Totals != nil && ev.Event != api.EventTotals {
		j.writeLine(j.totals(time.Now()), nil)
	}
	j.writeLine(ev, line)
}

// ready makes sure a file is open with room for n more bytes, rotating if
// it has none (an empty file always has room).
func (j *Journal) ready(n int64) error {
	if j.f == nil { // the last rotation failed half-way
		if err := j.reopen(); err != nil {
			return err
		}
	}
	if j.size > 0 && j.size+n > j.opts.MaxBytes {
		return j.rotate(time.Now())
	}
	return nil
}

// writeLine writes ev's line (line, or ev marshalled when line is nil).
func (j *Journal) writeLine(ev api.Event, line []byte) {
	if line == nil {
		var err error
		if line, err = jsonline.Marshal(ev); err != nil {
			j.fail(fmt.Errorf("encoding a %s event: %w", ev.Event, err))
			return
		}
	}
	if j.torn {
		// End the fragment a failed write may have left, so it costs one
		// unreadable line instead of also spoiling this one.
		line = append([]byte{'\n'}, line...)
	}
	line = append(line, '\n')
	n, err := j.f.Write(line)
	j.size += int64(n)
	if err != nil {
		j.torn = j.torn || n > 0
		j.fail(fmt.Errorf("writing %s: %w", j.path, err))
		return
	}
	j.torn = false
	if j.failing {
		j.opts.Logf("journal: writing again after losing %d event(s)", j.lost)
		j.failing, j.lost = false, 0
	}
}

// fail counts a lost event and logs the first failure of a streak.
func (j *Journal) fail(err error) {
	j.dropped.Add(1)
	j.lost++
	if !j.failing {
		j.failing = true
		j.opts.Logf("journal: %v (events are lost until writing works again)", err)
	}
}
