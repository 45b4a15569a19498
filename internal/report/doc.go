// Package report turns an instance's event journal into the numbers an
// operator sizes GPUs by: how often it stepped down or fell back after an
// OOM, why it restarted, how long it spent in each profile, and the share
// of time it ran below the profile it started in (the fallback rate).
//
// It is pure: events in, Summary out, so every accounting rule is a row in
// a table test. Reading the journal and deciding whether the instance is
// live belong to the caller (report/instances).
//
// Time accounting counts supervised time only: the time a child was
// running, from its `start` event to its `exit` event. Backoff, waiting for
// memory and the time after gpuguard ended are not "in a profile", because
// nothing served in it, and counting them would make a crash-looping
// instance look like it ran fine. A `start` while the previous child never
// logged its exit means gpuguard itself died unrecorded (kill -9, power
// loss); the unknown gap before that start is not counted either.
//
// The same accounting runs twice: in the journal's writer, as a Tally whose
// totals records go to disk, and here, resumed from those records. A
// journal is a sequence of runs (one per gpuguard process, told apart by
// the records' run_start); a run ends at its last line, so the time between
// a killed gpuguard and the next one is not counted. A journal without
// records (written by a gpuguard that had none) is one run, replayed from
// its first line.
package report
