// Package tasks is the deferred-task queue's store contract: what a store
// of deferred tasks must do (Store), the errors it answers with, and the
// rules every store shares (tickets, backoff). gpuguard decides *when* a
// task runs (memory and the window, in the supervisor); a store decides
// *what is durable*.
//
// Two stores implement it: tasks/sqlite, the embedded default under
// <state-dir>/deferred/, and tasks/redis, a Redis stream that every
// instance of one name on every host shares. tasks/taskstest is the
// conformance suite both pass.
//
// A task may carry bodies apart from its payload (a deferred request's,
// and its response's, up to 16 MiB each), which a store writes and reads
// back a chunk at a time, never whole in memory (body.go, Bodies).
//
// Every method takes the time it acts at (now) instead of reading a clock,
// so tests drive time; a store compares only the times it was given.
package tasks
