// Package core is the supervisor's decision core: the watermark rules, the
// step cadence, fit and the restart rules as one pure transition,
//
//	Decide(state, input) (state, []Effect)
//
// An input is something that happened (a sample, a child's exit, a
// request, a peer's verdict); an effect is something the loop must do
// (launch, change profile, journal, finish, reply, arm a timer). The core
// does no I/O and reads no clock: time comes in with each input. It
// imports only policy, api, trend and the standard library, so the
// compiler keeps it pure, and every policy edge is one row of a table
// test (decide_test.go).
//
// The loop (package supervisor) owns the goroutine, the child and the
// files; it turns what it receives into inputs and performs the effects
// in order. Where performing an effect can fail in a way the contract
// says undoes the decision (a live change whose state file cannot be
// written), the loop feeds NotTaken back and the core forgets the step.
package core
