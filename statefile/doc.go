// Package statefile writes and reads the state file that tells the child
// which profile it runs in (GPUGUARD_STATE). The child may read it at any
// moment, typically on the notify signal, so a reader must never see a
// half-written file: each write replaces the file atomically (temp file in
// the same directory, fsync, rename, fsync of the directory), and a crash
// leaves either the old or the new content, never a mix. The file is 0600:
// profile env may carry settings other users have no business reading.
package statefile
