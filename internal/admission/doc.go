// Package admission decides whether a tool inside the supervised server may
// put a new allocation on the GPU. It is pure bookkeeping: the supervisor
// passes in what the probe measured, and the Ledger remembers the bytes it
// has already promised (leases) so that two reservations made between two
// samples cannot both spend the same headroom. It does no I/O and reads no
// clock; the caller passes the time.
package admission
