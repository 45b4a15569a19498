// Package proc launches the supervised child and watches it until it is
// gone, with the guarantees a GPU supervisor needs and os/exec alone does not
// give:
//
//   - The child is exec'd directly, never through a shell, so arguments that
//     came from a profile's env cannot inject commands. argv[0] is resolved
//     against the PATH of the child's own environment (Spec.Env), because that
//     is the environment the user configured, not gpuguard's.
//   - The child leads its own process group, so one kill(-pgid) reaches every
//     worker it forked. Once the main process has exited, whatever is left of
//     the group is SIGKILLed before Done is closed: a stray worker would keep
//     holding GPU memory and the next start would find the GPU full.
//   - The child gets SIGKILL if gpuguard dies (Pdeathsig). Linux ties
//     Pdeathsig to the thread that forked, not the process (golang/go#27505),
//     so the fork and the wait run on one goroutine locked to its OS thread
//     for the child's whole life; otherwise the Go runtime retiring that
//     thread would kill a healthy child.
//   - stderr can be passed through unchanged while its last bytes are kept
//     for OOM classification, and reading it stops a bounded time after the
//     main process exits even when an escaped grandchild holds the pipe
//     open, so gpuguard never hangs on a child's output.
//
// The child inherits gpuguard's stdin, as users of a launcher expect (an
// interactive server still reads the terminal; under systemd it is
// /dev/null). When gpuguard's stdin is closed, the child gets /dev/null.
//
// A command that cannot run is a *RunError: ErrNotFound (gpuguard exits 127)
// or ErrCannotExecute (126), as for env(1). Check finds out what it can
// before anything is started; the exec itself reports the rest (a missing
// #! interpreter, a file for another machine), and a file without a #! line
// is never handed to a shell.
//
// Catches reads a process's signal dispositions (SigCgt, SigIgn in
// /proc/<pid>/status; ParseSignalMasks is the parser) so that the notify
// signal is only sent to a child that will not die of it.
//
// Tree lists a process and its descendants by reading /proc once; it is
// cheap enough to run every probe tick.
//
// A process that leaves the group (setsid, a double-forked daemon) escapes
// kill(-pgid). Where cgroup v2 is writable, Cgroups closes that gap: each
// child is cloned straight into a cgroup of its own (CLONE_INTO_CGROUP),
// which is killed as a whole (cgroup.kill) when the main process exits or
// Kill is called, then removed. Without it only the process group applies.
//
// Reaper makes gpuguard a child subreaper, so orphans from below a child
// are re-parented to gpuguard instead of init, and reaps them (and, as
// PID 1, everyone's). It never calls wait(-1), which would steal exit
// statuses from Start's waiter or from os/exec; see Reaper.
//
// What survives gpuguard itself being SIGKILLed: the main process dies of
// Pdeathsig; its descendants do not (Pdeathsig is per process). With
// Cgroups they stay in the instance's cgroup and the next OpenCgroups with
// the same key (the next run of the instance) kills them; under systemd
// the unit's cgroup is killed when gpuguard dies. docs/reliability.md has
// the measurements.
package proc
