// Package statefile writes and reads the state file that tells the child
// which profile it runs in (GPUGUARD_STATE). The child may read it at any
// moment, typically on the notify signal, so a reader must never see a
// half-written file: each write replaces the file atomically (temp file in
// the same directory, then rename), so a reader sees the old or the new
// content, never a mix. It is not fsynced: gpuguard writes it anew before
// every start, so surviving a host crash would buy nothing, and the fsyncs
// would sit between a decision and the child's signal. The file is 0600:
// profile env may carry settings other users have no business reading.
package statefile
