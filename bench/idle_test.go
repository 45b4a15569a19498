package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/internal/tasks/sqlite"
)

var (
	idleFor      = flag.Duration("idle.for", 30*time.Second, "idle cost: how long gpuguard's CPU time is measured")
	idleCompare  = flag.String("idle.compare", "", "idle cost: another gpuguard binary to measure beside it, in the same window (A/B of a change)")
	idleEarlyoom = flag.Bool("idle.earlyoom", true, "idle cost: also measure earlyoom (fetched from the Debian package if it is not on PATH), in dry-run mode")
	idleDoor     = flag.Bool("idle.door", true, "idle cost: also measure an instance with a front door and a ready, idle HTTP child")
	idleStore    = flag.Bool("idle.store", true, "idle cost: also measure an instance whose embedded deferred-task store is open")
)

// clockTick is USER_HZ, the unit of utime and stime in /proc/<pid>/stat;
// 100 on every Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// BenchmarkIdle is gpuguard's own cost while nothing happens: real binary,
// sim backend (one GPU, an empty sim dir), the default policy (200 ms
// interval, adaptive: calm polls every max_interval, 1 s), an idle child
// (sleep). After a warm-up it reads gpuguard's CPU time twice, idle.for
// apart: utime+stime from /proc/<pid>/stat (10 ms ticks, all threads,
// exited ones included) and the sum of the threads' schedstat run times
// (nanoseconds); and VmRSS / VmHWM from /proc/<pid>/status at the end.
// VmRSS is split into rss-anon-MiB (RssAnon: the heap, stacks, the
// runtime's own memory, what gpuguard allocates) and rss-file-MiB (RssFile:
// the binary's own text and rodata in the page cache, clean and shared),
// and rss-file-pmd-MiB is the part of the file pages mapped by 2 MiB
// (FilePmdMapped in smaps_rollup). On kernels with large page-cache folios
// (ext4, 6.16 on) a binary just written (go build, cp, install) sits in
// the page cache as 2 MiB folios and is mapped whole wherever one byte of
// it is touched: the same binary measured 29 MiB fresh from the linker and
// 19.5 MiB copied with O_DIRECT (docs/performance.md, "Idle RSS").
// wakeups/tick is how often gpuguard's threads were scheduled (schedstat's
// timeslice count) per tick, a figure the host's load does not change.
//
// This VM does not account steal time, so CPU time here grows with the
// host's contention (a vCPU preempted mid-wakeup is charged to whatever
// ran). For scale, a bare Go program ticking at the same interval
// (benchchild tick) runs beside gpuguard over the same window: floor-cpu-%
// is its share and x-floor gpuguard's cost as a multiple of it.
// With -idle.compare=BIN a second instance, run by BIN, idles beside the
// first over the same window: compare-cpu-% and compare-wakeups/tick.
// earlyoom (-idle.earlyoom, on by default) runs beside them too, with
// --dryrun so that it never kills anything, and its default thresholds, so
// that it sizes its own sleep (100 ms to 1 s) from the headroom:
// earlyoom-cpu-% and x-earlyoom, gpuguard's cost as a multiple of it.
// A second bare Go ticker runs at gpuguard's calm period (max_interval,
// 1 s): calm-floor-cpu-%, and calm-floor-x-earlyoom, what any Go program
// waking that often costs against earlyoom, which wakes as often; that is
// the part of x-earlyoom that is the Go runtime's and not gpuguard's.
// A third (benchchild probe, with one P as gpuguard has) also lists the
// first instance's sim device dir each time, what a calm sim sample
// would cost if it listed the dir at every sample (the sim lists it only
// when inotify says it changed), and nothing else: probe-floor-cpu-%,
// probe-floor-x-earlyoom, and x-probe-floor, gpuguard's cost as a
// multiple of it.
// wakeups/tick counts per 200 ms whatever gpuguard's own period.
//
// Two more instances idle in the same window. door- (-idle.door): one with
// a front door ([serve] listen) before a ready, idle HTTP child
// (benchchild http), which it polls for health every 5 s. store-
// (-idle.store): one whose embedded deferred-task store exists from an
// earlier run and is therefore open. Their rss-MiB against the first's
// is what a door and an open SQLite store add.
// Targets (issue 39): x-floor <= 0.3, x-earlyoom <= 3, door-x-floor <= 0.5,
// rss-MiB <= 14.
func BenchmarkIdle(b *testing.B) {
	defer reportLoad(b)()
	const interval = 200 * time.Millisecond
	const calmInterval = time.Second // the default max_interval
	for b.Loop() {
		s := newSandbox(b)
		ctx := context.Background()
		var sides []*idleSide
		start := func(prefix, bin string, pol string, child ...string) {
			g := s.startBin(bin, "idle"+strings.TrimSuffix(prefix, "-"), pol, nil, child...)
			g.running(ctx).Close()
			sides = append(sides, &idleSide{prefix: prefix, g: g})
		}
		start("", bin, s.policy("idle", ""), "sleep", "3600") // the defaults
		if *idleCompare != "" {
			start("compare-", *idleCompare, s.policy("idle", ""), "sleep", "3600")
		}
		if *idleDoor {
			door, child := freeAddr(b), freeAddr(b)
			start("door-", bin, s.policy("idle-door", fmt.Sprintf("[serve]\nlisten = %q\nupstream = \"http://%s\"\n", door, child)),
				childBin, "http", child, "0s", "0s")
			waitOK(b, "http://"+door+"/gpuguard/v1/status", 30*time.Second)
		}
		if *idleStore {
			dir := filepath.Join(s.dir, "idlestore")
			st, err := sqlite.Open(dir) // an earlier run's store, empty
			if err != nil {
				b.Fatal(err)
			}
			st.Close()
			start("store-", bin, s.policy("idle", ""), "sleep", "3600")
		}
		floor := startTicker(b, interval)
		calmFloor := startTicker(b, calmInterval)
		// What a listing of the sim dir at every calm sample costs any
		// Go program: the plain instance's sim device dir listed once a
		// calm period, with gpuguard's one scheduler P.
		probeFloor := exec.Command(childBin, "probe", filepath.Join(sides[0].g.stateDir, "sim", "0"), calmInterval.String())
		probeFloor.Env = append(os.Environ(), "GOMAXPROCS=1")
		if err := probeFloor.Start(); err != nil {
			b.Fatal(err)
		}
		var eo *exec.Cmd
		if *idleEarlyoom {
			eo = startEarlyoom(b)
		}
		// Warm-up: first samples, GC settled, and the calm period reached
		// (a trend of 5 samples over 1 s, then 5 s without a rise).
		time.Sleep(10 * time.Second)
		for _, sd := range sides {
			sd.tick0, sd.sched0, sd.wake0 = cpuTime(b, sd.g.cmd.Process.Pid)
		}
		_, floor0, floorWake0 := cpuTime(b, floor.Process.Pid)
		_, calm0, _ := cpuTime(b, calmFloor.Process.Pid)
		_, probe0, _ := cpuTime(b, probeFloor.Process.Pid)
		var eo0 time.Duration
		var eoWake0 int64
		if eo != nil {
			_, eo0, eoWake0 = cpuTime(b, eo.Process.Pid)
		}
		t0 := time.Now()
		time.Sleep(*idleFor)
		for _, sd := range sides {
			sd.tick1, sd.sched1, sd.wake1 = cpuTime(b, sd.g.cmd.Process.Pid)
		}
		_, floor1, floorWake1 := cpuTime(b, floor.Process.Pid)
		_, calm1, _ := cpuTime(b, calmFloor.Process.Pid)
		_, probe1, _ := cpuTime(b, probeFloor.Process.Pid)
		wall := time.Since(t0)
		b.ReportMetric(100*float64(calm1-calm0)/float64(wall), "calm-floor-cpu-%")
		b.ReportMetric(100*float64(probe1-probe0)/float64(wall), "probe-floor-cpu-%")
		b.ReportMetric(float64(sides[0].sched1-sides[0].sched0)/float64(probe1-probe0), "x-probe-floor")
		if eo != nil {
			_, eo1, eoWake1 := cpuTime(b, eo.Process.Pid)
			b.ReportMetric(100*float64(eo1-eo0)/float64(wall), "earlyoom-cpu-%")
			b.ReportMetric(float64(eoWake1-eoWake0)/float64(wall/interval), "earlyoom-wakeups/tick")
			for _, sd := range sides {
				b.ReportMetric(float64(sd.sched1-sd.sched0)/float64(eo1-eo0), sd.prefix+"x-earlyoom")
			}
			b.ReportMetric(float64(calm1-calm0)/float64(eo1-eo0), "calm-floor-x-earlyoom")
			b.ReportMetric(float64(probe1-probe0)/float64(eo1-eo0), "probe-floor-x-earlyoom")
			eo.Process.Kill()
			eo.Wait()
		}
		for _, t := range []*exec.Cmd{floor, calmFloor, probeFloor} {
			t.Process.Kill()
			t.Wait()
		}
		b.ReportMetric(100*float64(floor1-floor0)/float64(wall), "floor-cpu-%")
		b.ReportMetric(float64(floorWake1-floorWake0)/float64(wall/interval), "floor-wakeups/tick")
		for _, sd := range sides {
			sd.report(b, wall, interval, floor1-floor0)
			sd.g.stop()
		}
	}
	b.ReportMetric(0, "ns/op")
}

// idleSide is one gpuguard of BenchmarkIdle, its figures reported with
// prefix: its CPU time at the window's start and end, and at the end its
// memory.
type idleSide struct {
	prefix         string
	g              *guard
	tick0, tick1   time.Duration
	sched0, sched1 time.Duration
	wake0, wake1   int64
}

func (sd *idleSide) report(b *testing.B, wall, interval, floor time.Duration) {
	pid := sd.g.cmd.Process.Pid
	rss, hwm := memKiB(b, pid, "VmRSS:"), memKiB(b, pid, "VmHWM:")
	anon, file := memKiB(b, pid, "RssAnon:"), memKiB(b, pid, "RssFile:")
	pmd := rollupKiB(b, pid, "FilePmdMapped:")
	threads := memKiB(b, pid, "Threads:")
	p := sd.prefix
	b.ReportMetric(100*float64(sd.tick1-sd.tick0)/float64(wall), p+"cpu-%")
	b.ReportMetric(100*float64(sd.sched1-sd.sched0)/float64(wall), p+"cpu-sched-%")
	b.ReportMetric(float64(sd.sched1-sd.sched0)/float64(wall/interval)/1e3, p+"cpu-us/tick")
	b.ReportMetric(float64(sd.wake1-sd.wake0)/float64(wall/interval), p+"wakeups/tick")
	b.ReportMetric(float64(sd.sched1-sd.sched0)/float64(floor), p+"x-floor")
	b.ReportMetric(float64(rss)/1024, p+"rss-MiB")
	b.ReportMetric(float64(hwm)/1024, p+"hwm-MiB")
	b.ReportMetric(float64(anon)/1024, p+"rss-anon-MiB")
	b.ReportMetric(float64(file)/1024, p+"rss-file-MiB")
	b.ReportMetric(float64(pmd)/1024, p+"rss-file-pmd-MiB")
	b.ReportMetric(float64(threads), p+"threads")
}

// startTicker starts a bare Go program that wakes up every interval and
// does nothing else (benchchild tick).
func startTicker(b *testing.B, interval time.Duration) *exec.Cmd {
	b.Helper()
	t := exec.Command(childBin, "tick", interval.String())
	if err := t.Start(); err != nil {
		b.Fatal(err)
	}
	return t
}

// cpuTime is pid's CPU time from stat (10 ms resolution) and from the
// schedstat of its live threads (ns), and how many timeslices those threads
// have run.
func cpuTime(b *testing.B, pid int) (stat, sched time.Duration, slices int64) {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	// After "comm": state(0) ppid ... utime is field 14 of stat, index 11 here.
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	stat = time.Duration(ut+st) * clockTick
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	for _, t := range tasks {
		raw, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		f := strings.Fields(string(raw))
		ns, _ := strconv.ParseInt(f[0], 10, 64)
		n, _ := strconv.ParseInt(f[2], 10, 64)
		sched += time.Duration(ns)
		slices += n
	}
	return stat, sched, slices
}

// memKiB reads one "Key: N kB" (or plain count) line of /proc/<pid>/status.
func memKiB(b *testing.B, pid int, key string) int64 {
	b.Helper()
	return procKiB(b, fmt.Sprintf("/proc/%d/status", pid), key)
}

// rollupKiB is the field key of /proc/<pid>/smaps_rollup in KiB, 0 where
// the kernel does not have it (FilePmdMapped came in 5.4).
func rollupKiB(b *testing.B, pid int, key string) int64 {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil || !strings.Contains(string(raw), "\n"+key) {
		return 0
	}
	return procKiB(b, fmt.Sprintf("/proc/%d/smaps_rollup", pid), key)
}

// procKiB is the first field of the line that starts with key in a /proc
// file of "Key: N kB" lines.
func procKiB(b *testing.B, path, key string) int64 {
	b.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(l, key) {
			n, _ := strconv.ParseInt(strings.Fields(l)[1], 10, 64)
			return n
		}
	}
	b.Fatalf("no %s in %s", key, path)
	return 0
}

// startEarlyoom runs earlyoom beside the benchmark in dry-run mode (it
// reports what it would kill and kills nothing) with its default
// thresholds, and waits until it says so; nil, with a message, when
// earlyoom is not available. Not on PATH, it is fetched from the Debian
// package into a temp dir (apt-get download, dpkg-deb -x): nothing is
// installed system-wide and no earlyoom service is started.
func startEarlyoom(b *testing.B) *exec.Cmd {
	b.Helper()
	path, err := exec.LookPath("earlyoom")
	if err != nil {
		if path, err = fetchEarlyoom(b); err != nil {
			b.Logf("earlyoom not measured: %v", err)
			return nil
		}
	}
	cmd := exec.Command(path, "--dryrun", "-r", "3600")
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		b.Logf("earlyoom not measured: %v", err)
		return nil
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "dryrun mode enabled") {
			go func() { // keep draining its (rare) output
				for sc.Scan() {
				}
			}()
			return cmd
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	b.Logf("earlyoom not measured: it did not confirm dry-run mode")
	return nil
}

// fetchEarlyoom unpacks the Debian package's binary into a temp dir.
func fetchEarlyoom(b *testing.B) (string, error) {
	if _, err := exec.LookPath("apt-get"); err != nil {
		return "", errors.New("not on PATH, and no apt-get to fetch the Debian package")
	}
	dir := b.TempDir()
	get := exec.Command("apt-get", "download", "earlyoom")
	get.Dir = dir
	if out, err := get.CombinedOutput(); err != nil {
		return "", fmt.Errorf("apt-get download earlyoom: %v: %s", err, bytes.TrimSpace(out))
	}
	debs, _ := filepath.Glob(filepath.Join(dir, "earlyoom_*.deb"))
	if len(debs) != 1 {
		return "", fmt.Errorf("apt-get download earlyoom left %v", debs)
	}
	if out, err := exec.Command("dpkg-deb", "-x", debs[0], filepath.Join(dir, "x")).CombinedOutput(); err != nil {
		return "", fmt.Errorf("dpkg-deb -x: %v: %s", err, bytes.TrimSpace(out))
	}
	return filepath.Join(dir, "x", "usr", "bin", "earlyoom"), nil
}
