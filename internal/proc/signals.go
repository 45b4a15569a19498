package proc

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// SignalMasks are a process's signal dispositions as the SigIgn and SigCgt
// lines of /proc/<pid>/status show them: bit n-1 stands for signal n.
// They are process-wide (the threads share one table of handlers).
type SignalMasks struct {
	Ignored uint64 // SigIgn: disposition SIG_IGN
	Caught  uint64 // SigCgt: a handler is installed
}

// Handles reports whether sig is caught or ignored, that is whether
// sending it cannot end the process by its default action. Signals outside
// 1..64 are never handled.
func (m SignalMasks) Handles(sig syscall.Signal) bool {
	if sig < 1 || sig > 64 {
		return false
	}
	bit := uint64(1) << (uint(sig) - 1)
	return (m.Caught|m.Ignored)&bit != 0
}

// ParseSignalMasks reads SigIgn and SigCgt from the text of a
// /proc/<pid>/status file. Both lines must be present and hold hex masks.
func ParseSignalMasks(status string) (SignalMasks, error) {
	var m SignalMasks
	var seen int
	for line := range strings.Lines(status) {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		var dst *uint64
		switch key {
		case "SigIgn":
			dst = &m.Ignored
		case "SigCgt":
			dst = &m.Caught
		default:
			continue
		}
		v, err := strconv.ParseUint(strings.TrimSpace(val), 16, 64)
		if err != nil {
			return SignalMasks{}, fmt.Errorf("%s: %q is not a hex signal mask", key, strings.TrimSpace(val))
		}
		*dst = v
		seen++
	}
	if seen != 2 {
		return SignalMasks{}, fmt.Errorf("no SigIgn and SigCgt lines")
	}
	return m, nil
}

// Catches reports whether process pid catches or ignores sig, read from
// /proc/<pid>/status. A zombie shows no handlers, so a process that has
// exited but was not reaped yet reads as not catching. An error means the
// masks could not be read (the process is gone, /proc is not mounted or
// not readable).
func Catches(pid int, sig syscall.Signal) (bool, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false, fmt.Errorf("reading the signal dispositions of pid %d: %w", pid, err)
	}
	m, err := ParseSignalMasks(string(b))
	if err != nil {
		return false, fmt.Errorf("reading the signal dispositions of pid %d: %w", pid, err)
	}
	return m.Handles(sig), nil
}

// Catches reports whether the child's main process catches or ignores sig
// (see the function Catches). Once the main process has been reaped its
// pid may belong to another process, so the answer is then an error
// matching os.ErrProcessDone; the lock keeps it from being reaped during
// the read.
func (c *Child) Catches(sig syscall.Signal) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.exited {
		return false, fmt.Errorf("child %d: %w", c.pid, os.ErrProcessDone)
	}
	return Catches(c.pid, sig)
}
