package exitcode

// Exit codes of gpuguard (sysexits.h where one fits). A child's own status
// (its exit code n, or 128+s when killed by signal s) passes through as it
// is and has no name here.
const (
	OK          = 0
	Failure     = 1  // gpuguard's own failure, no such instance, refused step
	Usage       = 64 // EX_USAGE
	Unavailable = 69 // EX_UNAVAILABLE: GPU backend unavailable
	NoFit       = 75 // EX_TEMPFAIL: when_full = "exit" and no profile fits
	Config      = 78 // EX_CONFIG: configuration error, nothing started
	// CannotExecute and NotFound are what POSIX utilities that run another
	// command (env, nohup, timeout, xargs) exit with when it cannot run:
	// found but not executable, and not found.
	CannotExecute = 126
	NotFound      = 127
)

// Signaled is the status of a process killed by signal sig, as shells
// and tini report it: 128+sig.
func Signaled(sig int) int { return 128 + sig }
