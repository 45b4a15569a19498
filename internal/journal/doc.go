// Package journal is the instance's event log: <state-dir>/events.jsonl,
// one JSON object (an api.Event) a line, appended and rotated by size.
//
// It is written for the reader who comes after a crash. Each line goes out
// in a single write(2) on an O_APPEND descriptor and never spans two files,
// so a reader (`gpuguard report`, tail -f, a log shipper) sees whole lines
// or a torn last line, never two events interleaved; the reader skips and
// counts anything it cannot parse instead of failing.
//
// The supervisor loop must never wait on a disk. Observe only queues the
// event; one goroutine writes. A full queue or a failing disk loses events,
// which are counted (Dropped) and logged once per streak, and the next
// event tries again: a full disk must not stop the supervision it records.
//
// It keeps what matters for months, whatever the rate of reservations:
//   - granted (gpu) admissions are summarised into one admission line a
//     second with counts (batch.go); every other event is its own line;
//   - with Options.Totals, totals records carry the run's cumulative
//     figures, as its first line, the first line of every file, every
//     RecordEvery and at Close, so a report needs no line that rotated away;
//   - retention (rotate.go): past MaxBytes, events.jsonl becomes
//     events.jsonl.1 and older files shift up; MaxFiles rotated files are
//     kept, and with MaxAge every further file whose newest line is younger
//     than it, up to MaxRetained files. SetLimits changes these limits on a
//     running journal (a policy reload), applied as Open applies them.
package journal
