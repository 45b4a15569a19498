// Package backends names the GPU backends that code branches on (auto,
// sim, ...). It is pure data and imports nothing, so that package policy
// (imported by the supervisor) can spell its default without importing
// go-nvml.
//
// The table of backends is not here: a row holds the backend's opener,
// which takes the backend's own package (nvml needs cgo), so the table
// lives in backends/open, which only the composition root imports. Policy
// learns the names it accepts from its caller (policy.Backends), cmd
// passes open.Names(). Adding a backend is a package of its own and one
// row in open.Table.
package backends
