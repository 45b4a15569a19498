package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/internal/proc"
	"github.com/gpuguard/gpuguard/internal/sharing"
	"github.com/gpuguard/gpuguard/internal/tenants"
	"github.com/gpuguard/gpuguard/supervisor"
)

var restarts = flag.Int("restart.n", 200, "restart latency: number of restarts measured")

// restartPolicy restarts a crashed child at once: no backoff, no release
// wait, a budget that never runs out, and no start rule (the child
// crashes as it starts, which start_secs would count as never started).
const restartPolicy = `[watch]
interval = "200ms"
[restart]
on_crash = true
backoff = "0s"
backoff_max = "0s"
release_timeout = "0s"
max_restarts = 1000000
window = "10m"
start_secs = "0s"
`

// BenchmarkRestartLatency is the time from a child's exit to the next
// child's start: real binary, sim backend, a child that crashes (exit 1) as
// soon as it starts, no backoff and no release wait. The child stamps its
// start (first line of main) and its exit (right before exit(2)) with
// CLOCK_REALTIME; latency = next start - previous exit. It includes the
// new child's exec and Go runtime start, which exec-baseline (the same
// child started directly with os/exec, Start() -> first line of main)
// measures alone. floor is the same restart loop run by a bare os/exec
// loop in this process (wait for the exit, start the next, nothing else),
// right after gpuguard's in the same iteration; x-floor is gpuguard's
// median over the floor's. Target: median <= 10 ms, x-floor <= 1.5.
func BenchmarkRestartLatency(b *testing.B) {
	defer reportLoad(b)()
	var lat, floor []time.Duration
	for b.Loop() {
		s := newSandbox(b)
		g := s.start("restart", s.policy("restart", restartPolicy), nil,
			childBin, "restart", strconv.Itoa(*restarts))
		lat = restartGaps(b, *restarts, func() string { return g.line(time.Minute) })
		g.wait(time.Minute)
		floor = restartFloor(b, *restarts)
	}
	stats(b, "", "ms", lat)
	stats(b, "floor-", "ms", floor)
	b.ReportMetric(float64(median(lat))/float64(median(floor)), "x-floor")
	stats(b, "exec-baseline-", "ms", spawnBaseline(b, 100))
}

// restartFloor runs the restart child n+1 times from a bare loop (what a
// shell's `while ! child; do :; done` does, with GPUGUARD_RESTARTS set as
// gpuguard sets it) and returns its gaps, read as restartGaps reads
// gpuguard's.
func restartFloor(b *testing.B, n int) []time.Duration {
	b.Helper()
	lines := make(chan string, 2*n+2)
	for i := 0; i <= n; i++ {
		cmd := exec.Command(childBin, "restart", strconv.Itoa(n))
		cmd.Env = append(os.Environ(), "GPUGUARD_RESTARTS="+strconv.Itoa(i))
		out, err := cmd.Output()
		var ee *exec.ExitError
		if err != nil && !(errors.As(err, &ee) && i < n) {
			b.Fatalf("floor child %d: %v", i, err)
		}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			lines <- sc.Text()
		}
	}
	return restartGaps(b, n, func() string { return <-lines })
}

// restartGaps reads n restarts' "exit"/"start" lines and returns the gaps.
func restartGaps(b *testing.B, n int, next func() string) []time.Duration {
	b.Helper()
	var lat []time.Duration
	var exited time.Time
	for i := 0; i <= n; i++ {
		f := fields(b, next(), "start", 2)
		if atoi(b, f[0]) != i {
			b.Fatalf("start %s, want restart %d", f[0], i)
		}
		if i > 0 {
			lat = append(lat, unixNano(b, f[1]).Sub(exited))
		}
		if i == n {
			break
		}
		f = fields(b, next(), "exit", 2)
		exited = unixNano(b, f[1])
	}
	return lat
}

// spawnBaseline starts the child directly n times: Start() -> its first line.
func spawnBaseline(b *testing.B, n int) []time.Duration {
	b.Helper()
	var ds []time.Duration
	for range n {
		cmd := exec.Command(childBin, "spawn")
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		if !sc.Scan() {
			b.Fatal("no line from benchchild spawn")
		}
		ds = append(ds, unixNano(b, fields(b, sc.Text(), "start", 1)[0]).Sub(t0))
		cmd.Wait()
	}
	return ds
}

// BenchmarkRestartBreakdown is the same restart loop with the supervisor
// running in this process, wired as cmd wires it (the shared-GPU
// coordinator included, but no cgroup or reaper), and every collaborator
// timed, to show where a restart's time goes. Each phase is measured from
// when the loop took the exit (its call of the dead child's Exit). Per
// restart (median and p99, in microseconds):
//
//	exit->taken   child's exit(2) until the loop takes it (waitid, group
//	              kill, wait, stderr drain, Done, the loop's wake-up)
//	taken->sample the exit's events (journal, metrics), the restart plan,
//	              until the first sample after the exit starts
//	probe         that sample's sim probe call
//	claim         the start claim on the GPU (tenants.ClaimStart, in its
//	              own goroutine: files in the GPU's tenant dir)
//	claim->state  the claim's answer reaches the loop, the fresh sample it
//	              asks for, the fit, the checkpoint rotation (a stat here)
//	state         state file write (temp file, rename; no fsync)
//	launch        proc.Start: fork, exec, until it returns
//	exec->main    Launch returned -> the child's first line of main
//	total         exit -> next child's main
func BenchmarkRestartBreakdown(b *testing.B) {
	defer reportLoad(b)()
	type span struct{ t0, t1 time.Time }
	var (
		mu                     sync.Mutex
		taken                  []time.Time // the loop took the exit, per child
		probes, claims, states []span
		launches               []span // per child
	)
	record := func(list *[]span, t0 time.Time) {
		t1 := time.Now()
		mu.Lock()
		*list = append(*list, span{t0, t1})
		mu.Unlock()
	}
	// after is the first span that began at or after t.
	after := func(what string, list []span, t time.Time) span {
		for _, s := range list {
			if !s.t0.Before(t) {
				return s
			}
		}
		b.Fatalf("no %s span after %v", what, t)
		return span{}
	}
	rows := map[string][]time.Duration{}
	for b.Loop() {
		clear(rows)
		r, w, err := os.Pipe()
		if err != nil {
			b.Fatal(err)
		}
		lines := make(chan string, 1<<16)
		go func() {
			sc := bufio.NewScanner(r)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
		s := newSandbox(b)
		ip := runInProcess(b, s, "breakdown", restartPolicy,
			[]string{childBin, "restart", strconv.Itoa(*restarts)}, func(d *supervisor.Deps, c *sharing.Coordinator) {
				probe, writeState, coord := d.Probe, d.WriteState, *c
				d.Probe = timedProbe{probe, func(t0 time.Time) { record(&probes, t0) }}
				d.WriteState = func(path string, st api.ProfileState) error {
					defer record(&states, time.Now())
					return writeState(path, st)
				}
				*c = timedCoordinator{coord, func(t0 time.Time) { record(&claims, t0) }}
				d.Launcher = timedLauncher{w: w,
					launched: func(t0 time.Time) { record(&launches, t0) },
					taken: func(t time.Time) {
						mu.Lock()
						taken = append(taken, t)
						mu.Unlock()
					}}
			})
		var exits, starts []time.Time
		for i := 0; i <= *restarts; i++ {
			f := fields(b, <-lines, "start", 2)
			starts = append(starts, unixNano(b, f[1]))
			if i == *restarts {
				break
			}
			exits = append(exits, unixNano(b, fields(b, <-lines, "exit", 2)[1]))
		}
		select {
		case <-ip.done:
		case <-time.After(time.Minute):
			b.Fatal("supervisor did not end")
		}
		w.Close()
		mu.Lock()
		for i := 1; i <= *restarts; i++ {
			exited, started, tk := exits[i-1], starts[i], taken[i-1]
			p := after("probe", probes, tk)
			cl := after("claim", claims, tk)
			st := after("state", states, tk)
			l := launches[i]
			add := func(k string, from, to time.Time) { rows[k] = append(rows[k], to.Sub(from)) }
			add("exit->taken-", exited, tk)
			add("taken->sample-", tk, p.t0)
			add("probe-", p.t0, p.t1)
			add("claim-", cl.t0, cl.t1)
			add("claim->state-", cl.t1, st.t0)
			add("state-", st.t0, st.t1)
			add("launch-", l.t0, l.t1)
			add("exec->main-", l.t1, started)
			add("total-", exited, started)
		}
		mu.Unlock()
	}
	for _, k := range []string{"exit->taken-", "taken->sample-", "probe-", "claim-", "claim->state-", "state-", "launch-", "exec->main-", "total-"} {
		ds := rows[k]
		if len(ds) == 0 {
			b.Fatalf("%s: no samples", k)
		}
		b.ReportMetric(float64(median(ds))/1e3, k+"median-us")
		b.ReportMetric(float64(percentile(ds, 0.99))/1e3, k+"p99-us")
	}
	b.ReportMetric(0, "ns/op")
}

func median(ds []time.Duration) time.Duration { return percentile(ds, 0.5) }

func percentile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1)+0.5)]
}

// timedProbe reports when each Sample began and ended.
type timedProbe struct {
	gpu.Probe
	stamp func(t0 time.Time)
}

func (p timedProbe) Sample(ctx context.Context) (gpu.Sample, error) {
	defer p.stamp(time.Now())
	return p.Probe.Sample(ctx)
}

// timedCoordinator reports when each start claim began and ended.
type timedCoordinator struct {
	sharing.Coordinator
	stamp func(t0 time.Time)
}

func (c timedCoordinator) ClaimStart(ctx context.Context, gpus []string, settle time.Duration) tenants.StartOutcome {
	defer c.stamp(time.Now())
	return c.Coordinator.ClaimStart(ctx, gpus, settle)
}

// timedLauncher starts children with their stdout on w, reports when each
// Launch began and returned, and when the loop took each child's exit.
type timedLauncher struct {
	w        *os.File
	launched func(t0 time.Time)
	taken    func(t time.Time)
}

func (l timedLauncher) Launch(spec supervisor.LaunchSpec) (supervisor.Child, error) {
	t0 := time.Now()
	c, err := proc.Start(proc.Spec{Argv: spec.Argv, Env: spec.Env, ScanStderr: spec.ScanStderr, Stdout: l.w})
	if err != nil {
		return nil, err
	}
	l.launched(t0)
	return &timedChild{child: child{c}, taken: l.taken}, nil
}

// timedChild stamps the loop's first call of Exit: when it took the exit.
type timedChild struct {
	child
	once  sync.Once
	taken func(t time.Time)
}

func (c *timedChild) Exit() supervisor.Exit {
	c.once.Do(func() { c.taken(time.Now()) })
	return c.child.Exit()
}
