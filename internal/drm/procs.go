package drm

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuguard/gpuguard/gpu"
)

// procKey is one process's use of one watched device (its gpu.Device.Index).
type procKey struct{ pid, dev int }

// clientKey identifies one DRM client: client ids are unique per device,
// and one client shows in every fd that shares its open file (dup, fork,
// SCM_RIGHTS), so it is counted once, for the lowest PID that holds it.
type clientKey struct{ pdev, client string }

// scanner reads per-process usage below a procfs and a sysfs root. It
// keeps its buffers between scans.
type scanner struct {
	procfs, sysfs string
	byPCI         map[string]int // watched device's PCI address -> Index
	byGPUID       map[uint32]int // watched device's KFD gpu_id -> Index
	buf           []byte         // fdinfo read buffer
	fdinfo, kfd   map[procKey]uint64
	seen          map[clientKey]bool
}

func newScanner(procfs, sysfs string, byPCI map[string]int, byGPUID map[uint32]int) *scanner {
	return &scanner{procfs: procfs, sysfs: sysfs, byPCI: byPCI, byGPUID: byGPUID, buf: make([]byte, 8<<10),
		fdinfo: map[procKey]uint64{}, kfd: map[procKey]uint64{}, seen: map[clientKey]bool{}}
}

// scan returns every process that holds device-local memory on the
// watched devices, and how much, ordered by device and PID. Per process and device it is the
// larger of the DRM fdinfo figure and the KFD one: ROCm compute memory
// shows in KFD only, and where a kernel also shows it in fdinfo it must
// not count twice. It gives up, with ctx's error, when ctx ends.
func (s *scanner) scan(ctx context.Context) ([]gpu.Process, error) {
	clear(s.fdinfo)
	clear(s.kfd)
	clear(s.seen)
	if err := s.scanFdinfo(ctx); err != nil {
		return nil, err
	}
	s.scanKFD()
	for k, n := range s.kfd {
		s.fdinfo[k] = max(s.fdinfo[k], n)
	}
	out := make([]gpu.Process, 0, len(s.fdinfo))
	for k, n := range s.fdinfo {
		// A client that holds no device memory is no GPU process: gpuguard
		// itself (it keeps Intel render nodes open, and xe and i915 list
		// every client's regions, at 0 bytes too), or a server that has not
		// allocated yet. Listing it would make the supervisor wait for it
		// to free memory it never held.
		if n > 0 {
			out = append(out, gpu.Process{PID: k.pid, Device: k.dev, Used: n})
		}
	}
	slices.SortFunc(out, func(a, b gpu.Process) int {
		if a.Device != b.Device {
			return a.Device - b.Device
		}
		return a.PID - b.PID
	})
	return out, nil
}

// pids lists the numeric entries of dir in numeric order.
func pids(dir string) []int {
	f, err := os.Open(dir)
	if err != nil {
		return nil
	}
	defer f.Close()
	names, _ := f.Readdirnames(-1)
	out := make([]int, 0, len(names))
	for _, n := range names {
		if n == "" || n[0] < '1' || n[0] > '9' {
			continue
		}
		if pid, err := strconv.Atoi(n); err == nil {
			out = append(out, pid)
		}
	}
	slices.Sort(out)
	return out
}

// scanFdinfo reads the fdinfo of every DRM file descriptor (one whose link
// points into /dev/dri) of every process it may read. Only those fds'
// fdinfo is read: a readlink per fd is the cost of the others.
func (s *scanner) scanFdinfo(ctx context.Context) error {
	if len(s.byPCI) == 0 {
		return nil
	}
	for _, pid := range pids(s.procfs) {
		if err := ctx.Err(); err != nil {
			return err
		}
		p := strconv.Itoa(pid)
		fdDir := filepath.Join(s.procfs, p, "fd")
		f, err := os.Open(fdDir)
		if err != nil {
			continue // gone, or another user's
		}
		fds, _ := f.Readdirnames(-1)
		f.Close()
		for _, fd := range fds {
			target, err := os.Readlink(filepath.Join(fdDir, fd))
			if err != nil || !strings.HasPrefix(target, "/dev/dri/") {
				continue
			}
			b, ok := s.read(filepath.Join(s.procfs, p, "fdinfo", fd))
			if !ok {
				continue
			}
			fi, ok := parseFdinfo(b)
			if !ok || !fi.hasMem {
				continue
			}
			dev, ok := s.byPCI[fi.pdev]
			if !ok {
				continue
			}
			if fi.client != "" {
				k := clientKey{fi.pdev, fi.client}
				if s.seen[k] {
					continue
				}
				s.seen[k] = true
			}
			s.fdinfo[procKey{pid, dev}] += fi.vram
		}
	}
	return nil
}

// read reads a small file into the scanner's buffer.
func (s *scanner) read(path string) ([]byte, bool) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	n, err := io.ReadFull(f, s.buf)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return nil, false
	}
	return s.buf[:n], true
}

// scanKFD reads the VRAM of every ROCm compute process on the watched
// devices: /sys/class/kfd/kfd/proc/<pid>/vram_<gpu_id> (bytes).
func (s *scanner) scanKFD() {
	if len(s.byGPUID) == 0 {
		return
	}
	base := filepath.Join(kfdDir(s.sysfs), "proc")
	for _, pid := range pids(base) {
		dir := filepath.Join(base, strconv.Itoa(pid))
		for id, dev := range s.byGPUID {
			b, ok := s.read(filepath.Join(dir, "vram_"+strconv.FormatUint(uint64(id), 10)))
			if !ok {
				continue
			}
			if n, err := parseUint(b); err == nil && n > 0 {
				s.kfd[procKey{pid, dev}] = n
			}
		}
	}
}
