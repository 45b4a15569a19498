// Package open is the second half of the table of backends: how to open
// each row of package backends as a gpu.Probe, and how its visible-devices
// variables become the default device selection.
//
// It is apart from package backends because opening a backend takes the
// backend's own package (nvml needs cgo and go-nvml), while policy
// validation must stay pure: policy reads the leaf table of names and
// variables, and only the composition root (cmd) imports this package.
// The openers are keyed by the leaf table's names, and TestEveryBackendOpens
// fails for a row without an opener or an opener without a row. Adding a
// backend is its package, a row in backends.Table and its opener here.
package open
