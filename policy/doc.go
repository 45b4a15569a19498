// Package policy decodes and validates policy.toml into a resolved Policy:
// defaults applied, sizes and durations parsed, the profile ladder ordered.
// It is pure (no I/O beyond reading the named file) and table-tested.
package policy
