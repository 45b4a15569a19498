// Package view renders what `gpuguard status` gathered: a table for
// people (in the manner of systemctl, gpustat and nvitop) or the contract's
// JSON for scripts. Rendering is a pure function of the data, the time and
// whether to colour, so every layout rule is one table-test row; gathering
// (sockets, probes) stays in the command.
package view
