package proc

import (
	"bufio"
	"os"
	"strings"
)

// InNestedPIDNamespace reports whether this process lives in a PID
// namespace below the host's (a container): its /proc/self/status NSpid
// line then lists more than one pid. NVML reports host pids, which such a
// process cannot map to its own, so per-process GPU usage cannot be
// attributed to the child there.
func InNestedPIDNamespace() bool {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return false
	}
	defer f.Close()
	return nestedFromStatus(bufio.NewScanner(f))
}

func nestedFromStatus(sc *bufio.Scanner) bool {
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "NSpid:"); ok {
			return len(strings.Fields(rest)) > 1
		}
	}
	return false
}
