// Package lifetime holds the lifetimes of a run's parts as one actor
// group, in the manner of oklog/run (which it runs on): each part is an
// (execute, interrupt) pair, added as it opens, instead of a chain of
// defers.
//
// What it adds to run.Group is the order a supervisor needs. A run has one
// main actor (the supervisor) whose end ends the run, and parts that live
// around it (the control socket, the journal, the probe, the front door).
// When the group ends, main is interrupted first and the group waits for
// it to return, so that no part closes under it; then the parts are
// interrupted newest first, the reverse of their opening, as deferred
// closes ran. A run that fails before it starts aborts: what opened so far
// is closed in the same order, and nothing executes.
package lifetime
