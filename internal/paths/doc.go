// Package paths resolves where an instance keeps its files: the per-instance
// state dir (checkpoint, state file, journal, sim dir) and the runtime dir
// that holds control sockets. Resolution is pure: the environment and the
// uid are passed in, so every rule of the contract is one table row.
// PrepareStateDir is the one part that touches the file system: it creates
// a state dir, or refuses one that is not the running user's alone.
package paths
