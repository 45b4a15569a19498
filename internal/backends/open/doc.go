// Package open is the table of backends (Table): each one's name (the
// values of --backend and [watch] backend), the variables that limit
// which of its devices a child sees (the default of --devices), and how
// to open it as a gpu.Probe.
//
// Opening a backend takes the backend's own package (nvml needs cgo and
// go-nvml), so only the composition root (cmd) imports this package; the
// supervisor and policy stay free of the drivers. Policy validates
// [watch] backend against the names its caller passes (policy.Backends),
// and cmd passes Names(). Adding a backend is its package and one row in
// Table; TestTable fails for a row without an opener.
package open
