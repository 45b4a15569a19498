// Package paths resolves where an instance keeps its files: the per-instance
// state dir (checkpoint, state file, journal, sim dir) and the runtime dir
// that holds control sockets. Resolution is pure: the environment and the
// uid are passed in, so every rule of the contract is one table row.
package paths
