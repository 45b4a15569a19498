// Package store chooses and opens an instance's deferred-task store: the
// embedded SQLite one in its state dir, or the Redis one [defer] store
// names, recorded in the state dir so that `gpuguard tasks` finds the
// same queue later. It is the one place that imports both stores; the
// run (cmd/run_start.go) and the tasks command (cmd/tasks.go) open
// through it.
package store
