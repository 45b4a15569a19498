// Package control is gpuguard's control socket: a Unix socket in the
// runtime dir that speaks newline-delimited JSON, one object a line. The
// server side answers status, subscribe, oom, reserve, release, step and
// ready requests by calling a Backend (the supervisor) and fans profile
// events out to subscribers; the client side is what `gpuguard status` and
// `step` use. The tenants of a shared GPU (package tenants) talk to each
// other through it too, with internal requests (tenant.go).
//
// The socket is the only way in, so it carries the security and liveness
// rules: the directory is private, the socket is 0600, peers of another uid
// (other than root) are refused, and every resource a peer can make the
// server hold (connections, line length, queued events, blocked writes) is
// bounded, so no client can stall the supervisor. See docs/protocol.md.
//
// The instance lock (<name>.lock next to the socket, held with flock for
// the life of the process) is what says "an instance with this name is
// running": the kernel drops it when the process dies, even on SIGKILL, so
// a stale socket file never blocks a restart.
package control
