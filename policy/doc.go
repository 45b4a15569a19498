// Package policy decodes and validates policy.toml into a resolved Policy:
// defaults applied, sizes, durations and signals parsed, the profile ladder
// ordered. Every problem is reported at once as an ErrorList of *Error,
// each naming the file, line and key, because a config error found one at
// a time costs a restart per typo.
//
// It also holds the pure helpers that act on a policy: sizes (ParseSize,
// FormatSize), ${VAR} expansion of the child's arguments (ExpandArgs,
// CheckArgs), OOM classification of exit codes and stderr (OOM), and the
// ladder arithmetic (Fits, Limit). It does no I/O beyond reading the named
// file, so all of it is table-tested.
package policy
