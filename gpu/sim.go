package gpu

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"
)

// SimName is the Name every simulated device reports.
const SimName = "Simulated GPU"

// Defaults of SimOptions, the same as the --sim-devices and --sim-memory
// flags.
const (
	DefaultSimDevices        = 1
	DefaultSimMemory  uint64 = 16 << 30
)

// SimOptions configures the simulated backend.
type SimOptions struct {
	// Dir holds one directory per device, Dir/<i>/, whose files are the
	// usage of that device (see Sim).
	Dir string
	// Devices is the number of simulated GPUs (0 means DefaultSimDevices).
	Devices int
	// Memory is every device's total memory in bytes (0 means
	// DefaultSimMemory).
	Memory uint64
	// Select lists the watched device indices in the order given (from
	// --devices); nil watches them all.
	Select []int
}

// Sim is the simulated GPU backend. Device i's used memory is the sum of
// the integers (bytes) in the files of Dir/<i>/:
//
//   - a file named by a PID is that process's usage and counts only while
//     the process is alive, because a dead process's memory is freed. A
//     zombie (exited, not yet reaped) is dead: a GPU driver frees a
//     process's memory as it exits, when its files are closed, not when
//     its parent reaps it (which, for an orphan under a slow init, can
//     take seconds);
//   - any other name is another tenant and always counts;
//   - names starting with "." are ignored, so writers can write a temp name
//     and rename it into place (SimSet does);
//   - unreadable or non-numeric files, and subdirectories, count 0.
//
// Sim's per-process usage is always fresh: ProcessesAt equals Time. A
// device dir is listed again only when it changed (inotify says so) or
// holds a PID-named file or a symlink, whose count can change with
// nothing in the dir changing (simWatch): a sample of an idle device then
// costs one system call, as a real GPU's query does.
//
// `gpuguard sim xid` appends fault events to Dir/<i>/.xid (SimXid): Sample
// reads what was appended since the last one, delivers it on Faults, and,
// after a critical Xid, fails with ErrGPULost for SimLostFor, as a real
// GPU does until it is reset. Reading the file on the samples costs no
// extra wake-ups.
type Sim struct {
	dir     string
	devices []int
	devDirs []string // devices[k]'s dir is devDirs[k]
	total   uint64
	uuids   map[int]string
	faults  *simFaults
	// mu orders Sample and Close: the run closes the probe as it ends,
	// and the sampler may still be in a call then.
	mu    sync.Mutex
	watch *simWatch
}

// NewSim opens the simulated backend, creating Dir/<i>/ for every device.
func NewSim(o SimOptions) (*Sim, error) {
	if o.Dir == "" {
		return nil, errors.New("sim: no directory given")
	}
	n := o.Devices
	switch {
	case n == 0:
		n = DefaultSimDevices
	case n < 0:
		return nil, fmt.Errorf("sim: %d devices: want at least 1", n)
	}
	total := o.Memory
	if total == 0 {
		total = DefaultSimMemory
	}
	devices, err := simSelect(o.Select, n)
	if err != nil {
		return nil, err
	}
	for i := range n {
		if err := os.MkdirAll(simDeviceDir(o.Dir, i), 0o755); err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
	}
	real, err := simRealDir(o.Dir)
	if err != nil {
		return nil, err
	}
	uuids := make(map[int]string, len(devices))
	devDirs := make([]string, len(devices))
	for k, i := range devices {
		uuids[i] = SimUUID(real, i)
		devDirs[k] = simDeviceDir(o.Dir, i)
	}
	return &Sim{dir: o.Dir, devices: devices, devDirs: devDirs, total: total, uuids: uuids,
		faults: newSimFaults(o.Dir, uuids), watch: newSimWatch()}, nil
}

// simRealDir is dir made absolute with every symlink resolved, so that two
// spellings of one sim dir give the same UUIDs.
func simRealDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("sim: %w", err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("sim: %w", err)
	}
	return real, nil
}

// simSelect validates the --devices indices against the device count.
func simSelect(sel []int, n int) ([]int, error) {
	if len(sel) == 0 {
		all := make([]int, n)
		for i := range all {
			all[i] = i
		}
		return all, nil
	}
	out := make([]int, 0, len(sel))
	for _, i := range sel {
		if i < 0 || i >= n {
			return nil, fmt.Errorf("sim: device %d: there are %d simulated GPUs (0-%d); see --sim-devices", i, n, n-1)
		}
		if slices.Contains(out, i) {
			return nil, fmt.Errorf("sim: device %d listed twice", i)
		}
		out = append(out, i)
	}
	return out, nil
}

// SimUUID is the UUID of simulated device i of the sim dir whose real
// path (absolute, symlinks resolved) is realDir: "GPU-" and a UUID made of
// the first 16 bytes of sha256(realDir + "/" + i). Instances that share a
// sim dir share its GPUs, and so are tenants of them; instances with
// different sim dirs share none.
func SimUUID(realDir string, i int) string {
	h := sha256.Sum256([]byte(realDir + "/" + strconv.Itoa(i)))
	x := hex.EncodeToString(h[:16])
	return "GPU-" + x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}

func simDeviceDir(dir string, i int) string {
	return filepath.Join(dir, strconv.Itoa(i))
}

// Dir is the directory of per-device usage files.
func (s *Sim) Dir() string { return s.dir }

// Faults delivers the fault events `gpuguard sim xid` injects into the
// watched devices, as the samples read them.
func (s *Sim) Faults() <-chan Fault { return s.faults.out }

// Sample reads the usage files of every watched device. Every device's new
// fault events are delivered before a lost device fails the sample.
func (s *Sim) Sample(ctx context.Context) (Sample, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	smp := Sample{Time: now, ProcessesAt: now, Devices: make([]Device, 0, len(s.devices))}
	var lost error
	s.watch.drain()
	for k, i := range s.devices {
		if err := ctx.Err(); err != nil {
			return Sample{}, fmt.Errorf("sim: sampling GPU %d: %w", i, err)
		}
		r, err := s.watch.read(i, s.devDirs[k])
		if err != nil {
			return Sample{}, fmt.Errorf("sim: reading GPU %d: %w", i, err)
		}
		// The listing says whether the fault file is there: a calm sample
		// looks for it with no call of its own.
		if err := s.faults.poll(i, now, r.faults); err != nil && lost == nil {
			lost = err
		}
		smp.Devices = append(smp.Devices, Device{
			Index: i,
			UUID:  s.uuids[i],
			Name:  SimName,
			Used:  r.used,
			Total: s.total,
		})
		smp.Processes = append(smp.Processes, r.procs...)
	}
	if lost != nil {
		return Sample{}, lost
	}
	return smp, nil
}

// Close releases the watch on the device dirs.
func (s *Sim) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.watch.close()
}
