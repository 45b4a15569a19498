// Package exitcode holds the exit codes of gpuguard, in one place: the
// contract's "Exit codes of gpuguard run" section. cmd maps errors to them,
// and the supervisor ends a run with them (75 when no profile fits, 78
// when the command cannot be expanded, 1 on its own failures), so the two
// cannot drift apart. It is a leaf: it imports nothing.
package exitcode
