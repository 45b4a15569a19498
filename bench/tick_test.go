package bench

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/internal/proc"
)

var extraProcs = flag.Int("tick.procs", 400, "tick parts: extra host processes started for the tree/host+N case")

// BenchmarkTickParts is the CPU cost of the work the supervisor does on
// every tick besides deciding, each part alone:
//
//   - tree: proc.Tree(child), which the loop runs on every sample whatever
//     the scope: it lists /proc and reads every process's stat. tree/host
//     uses this host as it is, tree/host+N after starting N idle processes
//     (a busy inference host runs hundreds).
//   - gpu-ancestry: what the tree is needed for, done the other way round:
//     walk up the parent chain of each process that holds GPU memory (8
//     here) until the child or init; only those processes can matter for
//     scope = process and for the release wait.
//   - sim-sample: one Sample of the sim backend, empty and with 8 live PID
//     files.
//
// Each reports procs (processes on the host while it ran) and cpu-%@200ms:
// the share of one core at the default 200 ms interval.
func BenchmarkTickParts(b *testing.B) {
	pid := os.Getpid()
	perTick := func(b *testing.B, f func()) {
		b.ReportAllocs()
		for b.Loop() {
			f()
		}
		b.ReportMetric(float64(hostProcs()), "procs")
		b.ReportMetric(100*float64(b.Elapsed())/float64(b.N)/float64(200*time.Millisecond), "cpu-%@200ms")
	}
	tree := func() {
		if _, err := proc.Tree(pid); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("tree/host", func(b *testing.B) { perTick(b, tree) })

	sleepers := startSleepers(b, *extraProcs)
	gpuPIDs := sleepers[:min(8, len(sleepers))]
	b.Run(fmt.Sprintf("tree/host+%d", *extraProcs), func(b *testing.B) { perTick(b, tree) })
	b.Run("gpu-ancestry/8", func(b *testing.B) {
		perTick(b, func() {
			for _, p := range gpuPIDs {
				if !descendantOf(p, pid) {
					b.Fatalf("%d is not a descendant of %d", p, pid)
				}
			}
		})
	})

	dir := b.TempDir()
	sim, err := gpu.NewSim(gpu.SimOptions{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	sample := func() {
		if _, err := sim.Sample(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("sim-sample/empty", func(b *testing.B) { perTick(b, sample) })
	for _, p := range gpuPIDs {
		if err := gpu.SimSet(dir, 0, strconv.Itoa(p), 1<<30); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("sim-sample/8-pids", func(b *testing.B) { perTick(b, sample) })
}

// startSleepers starts n idle processes, killed at the end.
func startSleepers(b *testing.B, n int) []int {
	b.Helper()
	var pids []int
	for range n {
		c := exec.Command("sleep", "3600")
		if err := c.Start(); err != nil {
			b.Fatal(err)
		}
		pids = append(pids, c.Process.Pid)
		b.Cleanup(func() { c.Process.Kill(); c.Wait() })
	}
	return pids
}

func hostProcs() int {
	d, err := os.Open("/proc")
	if err != nil {
		return 0
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	n := 0
	for _, s := range names {
		if s[0] >= '1' && s[0] <= '9' {
			n++
		}
	}
	return n
}

// descendantOf walks up pid's parents to root (true) or to init (false):
// one small read per generation, independent of the number of processes
// on the host. (A sketch of the fix; see docs/performance.md.)
func descendantOf(pid, root int) bool {
	buf := make([]byte, 512)
	for depth := 0; pid > 1 && depth < 64; depth++ {
		if pid == root {
			return true
		}
		fd, err := syscall.Open("/proc/"+strconv.Itoa(pid)+"/stat", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != nil {
			return false
		}
		n, err := syscall.Read(fd, buf)
		syscall.Close(fd)
		if err != nil || n <= 0 {
			return false
		}
		i := bytes.LastIndexByte(buf[:n], ')')
		f := bytes.Fields(buf[i+1 : min(n, i+64)])
		if i < 0 || len(f) < 2 {
			return false
		}
		if pid, err = strconv.Atoi(string(f[1])); err != nil {
			return false
		}
	}
	return pid == root
}
