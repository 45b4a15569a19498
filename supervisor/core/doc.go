// Package core is the supervisor's decision core: every decision about the
// child is one pure transition,
//
//	Decide(state, given, input) (state, []Effect)
//
// An input is something that happened (a sample, a child's exit, a
// request, a tenant's verdict, the answer to a start claim); an effect is
// something the loop must do (launch, step, stop, journal, reply, claim
// the start, propose to the tenants). Given is what the loop holds as the
// input arrives (the policy in force, the level, observe mode). The
// state (the watermark rules' timers, the restart budget, the one start
// at a time, a held request's wish to wake) is the core's alone: its
// fields are unexported, so the loop changes it only through Decide.
//
// The decisions, one file each: the watermark rules and the steps they
// ask for (decide.go, rules.go), the restart rules for an exit (ends.go,
// exit.go, starts.go), a start and what it waits for (start.go) and its
// turn on a shared GPU (claim.go), sleeping and waking (sleep.go), making
// room on a shared GPU and sleeping for another tenant (room.go), the end
// of a live change through server actions (actions.go) and its measured
// effect (measure.go), a manual step and the fit of a profile (fit.go),
// what the tenants of a shared GPU ask (peer.go), and where a reload's
// ladder puts the instance (reladder.go).
//
// The core does no I/O and reads no clock: time comes in with each input.
// It imports only values and pure functions of the standard library, api
// (the journal's and the tenants' words), policy (what it decides by),
// internal/exitcode and internal/room (who sleeps to make room);
// TestImportsArePure holds it to that list, so every policy edge stays
// one row of a table test (decide_test.go and its neighbours).
//
// The loop (package supervisor) owns the goroutine, the child and the
// files; it turns what it receives into inputs and performs the effects in
// order, feeding back what came of them: a live change whose state file
// cannot be written is NotTaken and the core forgets the step; a live
// wake is Woke; a launch is Launched; the calls of a live change through
// server actions end as ActionsDone.
package core
