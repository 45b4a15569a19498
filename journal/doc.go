// Package journal is the instance's event log: <state-dir>/events.jsonl,
// one JSON object (an api.Event) a line, appended and rotated by size.
//
// It is written for the reader who comes after a crash. Each line goes out
// in a single write(2) on an O_APPEND descriptor, so a reader (`gpuguard
// report`, tail -f, a log shipper) sees whole lines or a torn last line,
// never two events interleaved; the reader skips and counts anything it
// cannot parse instead of failing.
//
// The supervisor loop must never wait on a disk. Observe only queues the
// event; one goroutine writes. A full queue or a failing disk loses events,
// which are counted (Dropped) and logged once per streak, and the next
// event tries again: a full disk must not stop the supervision it records.
//
// The total size is bounded: when events.jsonl would grow past MaxBytes it
// becomes events.jsonl.1, older files shift up, and events.jsonl.<Keep+1>
// is removed, so the journal never holds more than MaxBytes × (Keep+1).
package journal
