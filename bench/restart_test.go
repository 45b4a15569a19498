package bench

import (
	"bufio"
	"context"
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
	"github.com/gpuguard/gpuguard/proc"
	"github.com/gpuguard/gpuguard/supervisor"
)

var restarts = flag.Int("restart.n", 200, "restart latency: number of restarts measured")

// restartPolicy restarts a crashed child at once: no backoff, no release
// wait, a budget that never runs out.
const restartPolicy = `[watch]
interval = "200ms"
[restart]
on_crash = true
backoff = "0s"
backoff_max = "0s"
release_timeout = "0s"
max_restarts = 1000000
window = "10m"
`

// BenchmarkRestartLatency is the time from a child's exit to the next
// child's start: real binary, sim backend, a child that crashes (exit 1) as
// soon as it starts, no backoff and no release wait. The child stamps its
// start (first line of main) and its exit (right before exit(2)) with
// CLOCK_REALTIME; latency = next start - previous exit. It includes the
// new child's exec and Go runtime start, which exec-baseline (the same
// child started directly with os/exec, Start() -> first line of main)
// measures alone. Target: median <= 10 ms.
func BenchmarkRestartLatency(b *testing.B) {
	defer reportLoad(b)()
	var lat []time.Duration
	for b.Loop() {
		s := newSandbox(b)
		g := s.start("restart", s.policy("restart", restartPolicy), nil,
			childBin, "restart", strconv.Itoa(*restarts))
		lat = restartGaps(b, *restarts, func() string { return g.line(time.Minute) })
		g.wait(time.Minute)
	}
	stats(b, "", "ms", lat)
	stats(b, "exec-baseline-", "ms", spawnBaseline(b, 100))
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
// running in this process and every collaborator timed, to show where a
// restart's time goes. Per restart (median and p99, in microseconds):
//
//	exit->done    child's exit(2) until proc's Done closes (waitid, group
//	              kill, wait, stderr drain)
//	done->sample  the loop takes the exit: journal and metrics events,
//	              restart planning, then the immediate sample starts
//	probe         the sim probe's Sample
//	sample->rot   the sample reaches the loop, the fit is checked
//	rotate        checkpoint rotation (no checkpoint here: a stat)
//	state         state file write (temp, fsync, rename, fsync dir)
//	launch        proc.Start: fork, exec, until it returns
//	exec->main    Launch returned -> the child's first line of main
//	total         exit -> next child's main
func BenchmarkRestartBreakdown(b *testing.B) {
	defer reportLoad(b)()
	type span struct{ t0, t1 time.Time }
	var (
		mu                   sync.Mutex
		done                 []time.Time // Done closed, per child
		probes, rots, states []span
		launches             []span // per child
	)
	record := func(list *[]span, t0 time.Time) {
		t1 := time.Now()
		mu.Lock()
		*list = append(*list, span{t0, t1})
		mu.Unlock()
	}
	// after is the first span that began at or after t.
	after := func(list []span, t time.Time) span {
		for _, s := range list {
			if !s.t0.Before(t) {
				return s
			}
		}
		b.Fatalf("no span after %v", t)
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
			[]string{childBin, "restart", strconv.Itoa(*restarts)}, func(d *supervisor.Deps) {
				probe, writeState, rotate := d.Probe, d.WriteState, d.RotateCheckpoint
				d.Probe = timedProbe{probe, func(t0 time.Time) { record(&probes, t0) }}
				d.WriteState = func(path string, st api.ProfileState) error {
					defer record(&states, time.Now())
					return writeState(path, st)
				}
				d.RotateCheckpoint = func(path string, keep int) error {
					defer record(&rots, time.Now())
					return rotate(path, keep)
				}
				d.Launcher = timedLauncher{w: w, stamp: func(t0 time.Time, c supervisor.Child) {
					record(&launches, t0)
					go func() {
						<-c.Done()
						t := time.Now()
						mu.Lock()
						done = append(done, t)
						mu.Unlock()
					}()
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
			exited, started := exits[i-1], starts[i]
			d := done[i-1]
			p := after(probes, d)
			rot := after(rots, p.t1)
			st := after(states, rot.t1)
			l := launches[i]
			add := func(k string, from, to time.Time) { rows[k] = append(rows[k], to.Sub(from)) }
			add("exit->done-", exited, d)
			add("done->sample-", d, p.t0)
			add("probe-", p.t0, p.t1)
			add("sample->rot-", p.t1, rot.t0)
			add("rotate-", rot.t0, rot.t1)
			add("state-", st.t0, st.t1)
			add("launch-", l.t0, l.t1)
			add("exec->main-", l.t1, started)
			add("total-", exited, started)
		}
		mu.Unlock()
	}
	for _, k := range []string{"exit->done-", "done->sample-", "probe-", "sample->rot-", "rotate-", "state-", "launch-", "exec->main-", "total-"} {
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

// timedLauncher starts children with their stdout on w and reports when
// each Launch began and returned.
type timedLauncher struct {
	w     *os.File
	stamp func(t0 time.Time, c supervisor.Child)
}

func (l timedLauncher) Launch(spec supervisor.LaunchSpec) (supervisor.Child, error) {
	t0 := time.Now()
	c, err := proc.Start(proc.Spec{Argv: spec.Argv, Env: spec.Env, ScanStderr: spec.ScanStderr, Stdout: l.w})
	if err != nil {
		return nil, err
	}
	l.stamp(t0, child{c})
	return child{c}, nil
}
