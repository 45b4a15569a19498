// Package supervisor is gpuguard's state machine and its loop. One goroutine
// owns all state: samples, child exits, timers, signals and control requests
// arrive on channels; the watermark, restart and ladder rules are pure
// functions tested as tables. It imports no cobra, no go-nvml and no os/exec:
// the child is started through a Launcher and the GPUs are read through a
// gpu.Probe, both supplied by the caller.
package supervisor
