// Package sdnotify tells systemd (Type=notify) what gpuguard is doing:
// READY=1 once the first child has started, STATUS= lines with the profile
// and watermark, STOPPING=1, and WATCHDOG=1 keep-alives from the loop.
//
// The environment is injected rather than read from os.Getenv, so tests
// and the run command decide what gpuguard sees; for the same reason the
// datagram is sent here rather than with daemon.SdNotify, which reads (and
// can only unset) the process environment. Without NOTIFY_SOCKET every
// method is a no-op, so the same binary runs under systemd, a terminal or
// another supervisor. CleanEnv strips the variables from the child's
// environment: they address gpuguard, and a model server that notices
// NOTIFY_SOCKET would otherwise report readiness on gpuguard's behalf.
package sdnotify
