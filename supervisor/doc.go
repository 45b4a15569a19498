// Package supervisor is gpuguard's state machine and its loop. One goroutine
// owns all state: samples, child exits, timers, signals and control requests
// arrive on channels; the watermark, restart and ladder rules are pure
// functions tested as tables. It imports no cobra, no go-nvml and no os/exec:
// the child is started through a Launcher and the GPUs are read through a
// gpu.Probe, both supplied by the caller.
//
// The loop (loop.go) is the dispatcher: its select receives each input,
// feeds the decision core (supervisor/core: Decide(State, Input) (State,
// []Effect), which also routes a child's exit and picks the way of a
// change of profile) and performs the effects (perform.go). Its state
// lives with owners it reaches by name: the child's lifecycle in l.life
// (life.go: the state, the plan, the children so far, the running child,
// a stop, the next start's wait, the end), the newest reading in
// l.latest, the fits told in l.fit, the state file in l.stateFile, and
// the rooms around the loop (rooms.go: the pacer, the probe's health, the
// reporter, the door, the server actions, GPU faults, the minute record,
// waking), each given what it needs rather than a pointer to the loop.
//
// Off the loop, the public handle is three types, each reaching the loop
// through a loopPort (port.go): Supervisor (Run, Status, Step, MarkOOM,
// Reload, the door's reports, and the wiring), its Admission
// (shared_api.go: reserve and release over the ledger, the leases
// published to the other tenants, their requests) and its TaskHost
// (deliverer.go: what the deferred-task deliverer, internal/deliver,
// needs of the instance; the supervisor drives it as a Deliverer). The
// control socket serves the supervisor, its Admission and the deliverer's
// API as one (cmd's socketBackend).
//
// Every start says how it chose its profile (fit.go): the profiles tried
// from the one aimed at, their needs, and the room on the fullest watched
// GPU, told once as a stderr line, a `fit` journal event and status's `fit`.
// The same arithmetic refuses a manual step into a profile that does not
// fit, before anything is stopped, and ends a run at once (75) when no
// profile can ever fit.
package supervisor
