// Package reload re-reads a running instance's policy for `gpuguard
// reload`: its Reloader is the supervisor's. It reads exactly the file the
// run started with and resolves it the way the run was resolved (the
// caller's Resolve, so a flag keeps overriding the file), and refuses,
// with nothing changed, a file that is invalid, one that would change what
// only a new run can (the instance's name, the front door's address, the
// task store, the backend, the devices), and a metrics address that cannot
// be bound. A run that started from the built-in defaults has no file to
// re-read and refuses every reload.
//
// cmd builds one in the composition root (run_start.go) from the run's
// flags; nothing here knows about cobra or flags.
package reload
