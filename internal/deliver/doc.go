// Package deliver is gpuguard's deferred-task deliverer: it stores the
// tasks an instance defers (a reservation with a payload, a request the
// front door defers), and delivers them one at a time when memory lets a
// task go: to the control socket's subscribers, or, for a deferred
// request (tool http), through the front door's Replayer.
//
// Tasks is its API (the control socket's control.Tasks, the front door's
// frontdoor.Deferrer, the metrics' counts) and the handle the supervisor
// drives: Run for the run, Poke after each sample, LeaseReleased after a
// release, ChildExited at the child's exit. What it needs of the instance
// is an Instance (reservations and releases through the admission, journal
// lines through the loop, whether a deferred request may be replayed, the
// [defer] in force): the supervisor's TaskHost, handed to New in cmd. The
// store is a Store (tasks.Store: SQLite or Redis); the deliverer decides
// when a task runs, the store what is durable.
//
// The deliverer runs on a goroutine of its own (run.go): store calls (an
// fsync, a Redis round trip) never hold the supervisor's loop. What the
// other goroutines change (a connection's done, a subscriber leaving, the
// loop's release or exit, a replay's end) is the slot (slot.go): the
// subscribers, the tasks in flight and who holds the one-at-a-time slot. A
// done leases the next task in its own commit when that one can go at once
// (next.go). The counts of the store's tasks are kept, not queried at each
// change (counts.go). See docs/tasks.md and the contract's "Deferred
// tasks".
package deliver
