// Package launcher is package proc as the supervisor's Launcher: it
// starts each child with proc (process group, Pdeathsig, cgroups, the
// reaper) and hands it back as a supervisor.Child. It holds the cleanup
// that goes beyond the child's process group for the whole run: the child
// subreaper and the instance's cgroups.
//
// It is a room of its own so that neither side knows the other: proc
// imports nothing of gpuguard, and the supervisor imports no os/exec; the
// adapter only translates types.
package launcher
