// Package supervisor is gpuguard's state machine and its loop. One goroutine
// owns all state: samples, child exits, timers, signals and control requests
// arrive on channels; the watermark, restart and ladder rules are pure
// functions tested as tables. It imports no cobra, no go-nvml and no os/exec:
// the child is started through a Launcher and the GPUs are read through a
// gpu.Probe, both supplied by the caller.
//
// Every start says how it chose its profile (fit.go): the profiles tried
// from the one aimed at, their needs, and the room on the fullest watched
// GPU, told once as a stderr line, a `fit` journal event and status's `fit`.
// The same arithmetic refuses a manual step into a profile that does not
// fit, before anything is stopped, and ends a run at once (75) when no
// profile can ever fit.
package supervisor
