package policy

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ParseSignal reads a signal as a name, with or without the SIG prefix and
// in any case ("SIGTERM", "TERM", "term"), or as a number ("15"). Numbers
// are accepted for signals that have a name on this system only, so a
// typo cannot pick an unrelated realtime signal.
func ParseSignal(s string) (syscall.Signal, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("empty signal name")
	}
	if n, err := strconv.Atoi(t); err == nil {
		sig := syscall.Signal(n)
		if n <= 0 || unix.SignalName(sig) == "" {
			return 0, fmt.Errorf("unknown signal number %d", n)
		}
		return sig, nil
	}
	name := strings.ToUpper(t)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if sig := unix.SignalNum(name); sig != 0 {
		return sig, nil
	}
	return 0, fmt.Errorf("unknown signal %q (use a name such as \"SIGTERM\" or \"TERM\")", s)
}

// SignalName is the conventional name of sig ("SIGTERM"), or its number
// when it has none; "none" for 0, which a policy uses to mean no signal.
func SignalName(sig syscall.Signal) string {
	if sig == 0 {
		return "none"
	}
	if n := unix.SignalName(sig); n != "" {
		return n
	}
	return strconv.Itoa(int(sig))
}
