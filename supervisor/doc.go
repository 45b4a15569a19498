// Package supervisor is gpuguard's actor: one goroutine owns all state, and
// samples, child exits, timers, signals and control requests arrive on
// channels. It imports no cobra, no go-nvml and no os/exec: the child is
// started through a Launcher, the GPUs are read through a gpu.Probe, and
// the other tenants of a shared GPU are reached through Peers, all
// supplied by the caller (cmd).
//
// Every decision is the decision core's (supervisor/core): the loop
// (loop.go) turns what it receives into core inputs with their facts
// (facts.go, sample.go, childexit.go), feeds them to core.Decide and
// performs the effects in order (effects.go), feeding back what came of
// them. The effects act on the child through its lifecycle (life.go: the
// state, the level, the children so far, the running child, a restart or
// a sleep under way, server actions, a stop, the next start, the end, the
// state file and the front door): launching (launch.go), changing profile
// (stepping.go), sleeping and waking (asleep.go). How the GPUs are read is
// supervisor/sense: the pacer and its sampler, a run of failed calls, Xid
// faults, the per-minute record. What the other tenants of a shared GPU
// see of the instance (its tenant record, its facts when their decisions
// are judged, and as a candidate to sleep for one of them) is self
// (peers.go, room.go), read from the lifecycle and the newest reading.
//
// Off the loop, the public handle is three types, each reaching the loop
// through a loopPort (port.go): Supervisor (Run, Status, Step, MarkOOM,
// Reload, the door's reports, and the wiring), its Admission
// (admission.go: reserve and release over the ledger, and what the other
// tenants of the GPUs ask of it) and its TaskHost (deliverer.go: what the
// deferred-task deliverer, internal/deliver, needs of the instance; the
// supervisor drives it as a Deliverer). The control socket serves the
// supervisor, its Admission and the deliverer's API as one (cmd's
// socketBackend).
//
// Every start says how it chose its profile (fitline.go): the profiles
// tried from the one aimed at, their needs, and the room on the fullest
// watched GPU, told once as a stderr line, a `fit` journal event and
// status's `fit`.
package supervisor
