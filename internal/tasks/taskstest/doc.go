// Package taskstest is the conformance suite of tasks.Store: every store
// runs Run in its own tests, so the supervisor can rely on one behaviour
// whichever store a policy names.
package taskstest
