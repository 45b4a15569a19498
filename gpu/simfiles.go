package gpu

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/gpuguard/gpuguard/internal/regfile"
	"github.com/gpuguard/gpuguard/internal/saturate"
)

// maxSimFile bounds how much of a usage file is read: a decimal uint64 with
// surrounding whitespace fits easily, anything longer is not a number.
const maxSimFile = 64

// simReading is what one listing of a device dir found.
type simReading struct {
	used   uint64
	procs  []Process
	faults bool // the fault event file (SimXidFile) is there
	// settled says the reading holds until the dir itself changes: every
	// count came from a file in it. A PID-named file counts only while
	// its process lives, and a symlink's target changes elsewhere, so a
	// listing with either is not settled and is taken afresh each sample.
	settled bool
}

// readSimDevice sums the usage files in dir (device index dev), and says
// whether the fault event file (SimXidFile) is there. A missing dir counts
// as an idle device.
func readSimDevice(dir string, dev int) (simReading, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return simReading{}, nil
	}
	if err != nil {
		return simReading{}, err
	}
	r := simReading{settled: true}
	for _, e := range entries {
		name := e.Name()
		r.faults = r.faults || name == SimXidFile
		if strings.HasPrefix(name, ".") || e.IsDir() {
			continue
		}
		pid, isPID := simPID(name)
		if isPID || e.Type()&fs.ModeSymlink != 0 {
			r.settled = false
		}
		if isPID && !alive(pid) {
			continue
		}
		n := readSimFile(filepath.Join(dir, name))
		r.used = saturate.Add(r.used, n)
		if isPID {
			r.procs = append(r.procs, Process{PID: pid, Device: dev, Used: n})
		}
	}
	slices.SortFunc(r.procs, func(a, b Process) int { return a.PID - b.PID })
	return r, nil
}

// simPID reports whether name is a process ID: a positive decimal without
// sign or leading zeros that fits a pid_t. "0" and "-1" would make kill(2)
// address process groups, so they are tenant names, not PIDs.
func simPID(name string) (int, bool) {
	if name == "" || name[0] < '1' || name[0] > '9' {
		return 0, false
	}
	n, err := strconv.ParseInt(name, 10, 32)
	if err != nil {
		return 0, false
	}
	return int(n), true
}

// alive reports whether process pid runs: kill(pid, 0) fails with ESRCH
// only for a process that is gone (EPERM means it exists but is another
// user's), and a zombie, which kill(2) still finds, has exited. When
// /proc cannot tell, a process that exists counts as alive.
func alive(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	return !exited(string(b))
}

// exited reports whether a /proc/<pid>/stat line is that of a process that
// has exited: state Z (zombie) or X (dead). The state follows the command
// name, which is in parentheses and may itself hold ") ".
func exited(stat string) bool {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return false
	}
	state := stat[i+2]
	return state == 'Z' || state == 'X'
}

// readSimFile returns the integer in the file, or 0 when it cannot be read
// or is not a non-negative decimal integer.
func readSimFile(path string) uint64 {
	f, err := regfile.Open(path, os.O_RDONLY, 0) // a FIFO would hold every sample
	if err != nil {
		return 0
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSimFile+1))
	if err != nil || len(b) > maxSimFile {
		return 0
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0
	}
	return n
}
