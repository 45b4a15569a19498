// Package backends is the table of GPU backends: each one's name (the
// values of --backend and [watch] backend) and the variables that limit
// which of its devices a child sees (the default of --devices). It is
// pure data and imports nothing, so that package policy can validate a
// name without importing go-nvml, and cmd can print the same list in its
// flag help and errors.
//
// How to open a backend is not here: that takes the backend's own package
// (nvml needs cgo), so the openers live beside this table in backends/open,
// keyed by its names, which only the composition root imports; a test
// there fails for a row without an opener. Adding a backend is a package
// of its own, a row in Table, and its opener.
package backends
