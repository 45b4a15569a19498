package bench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	rampSamples = flag.Int("ramp.samples", 20, "ramp detection: number of ramps measured")
	rampTrace   = flag.String("ramp.trace", "", "ramp detection: write the first ramp's trace (samples seen through the status socket, the step) to this JSON file, for docs/sensing.md's picture")
	jumpSamples = flag.Int("jump.samples", 10, "jump from calm: number of jumps measured")
)

// The ramp and the thresholds of the sensing benchmarks: the policy
// defaults (low 0.70, high 0.90, critical 0.97), a ramp from 0.50 rising
// 0.1 a second.
const (
	rampFrom, rampRate = 0.50, 0.10
	defHigh            = 0.90
	simTotal           = 16 << 30 // --sim-memory default
)

// sensePolicy is the default policy (adaptive polling, 200 ms in [20 ms,
// 1 s]) with sustain and grace 0, so the first sample above high steps,
// and a ladder of n live profiles.
func sensePolicy(n int) string {
	var pol strings.Builder
	pol.WriteString(`[watermark]
sustain = "0s"
grace = "0s"
recover_after = "0s"
[notify]
signal = "SIGUSR1"
`)
	for i := range min(n, 256) {
		fmt.Fprintf(&pol, "[[profile]]\nname = \"p%d\"\nlive = true\n", i)
	}
	return pol.String()
}

// BenchmarkRampDetection is the time from GPU memory crossing high to the
// notify signal at the child while memory ramps up: real binary, sim
// backend, the default policy (adaptive polling, 200 ms base interval)
// with sustain = 0 and grace = 0. The child (benchchild ramp) rewrites its
// sim usage every millisecond from 0.50 rising 0.1/s and computes when it
// passed high (0.90, 4 s in); t1 is when the signal arrives. The first
// ramp starts from calm (0.50 for 8 s: polled every 1 s); between ramps it
// sits at 0.50 for a random 1-2 s. decide- is crossing -> the stepdown's
// time in the journal. Target: median <= 25 ms.
//
// With -ramp.trace FILE it also polls the status socket every 2 ms during
// the first ramp and writes what it saw (docs/sensing.md's picture).
func BenchmarkRampDetection(b *testing.B) {
	defer reportLoad(b)()
	var lat, decide []time.Duration
	var extra int
	for b.Loop() {
		lat, decide, extra = lat[:0], decide[:0], 0
		s := newSandbox(b)
		n := *rampSamples
		g := s.start("ramp", s.policy("ramp", sensePolicy(2*n+1)), nil, childBin, "ramp", strconv.Itoa(n),
			fmt.Sprint(rampFrom), fmt.Sprint(rampRate), fmt.Sprint(defHigh), fmt.Sprint(simTotal), "1s", "8s")
		var tr *tracer
		if *rampTrace != "" {
			tr = startTracer(b, g, 2*time.Millisecond)
		}
		// A ramp's decision is the first stepdown between its start and
		// the signal (matchDecisions, as for BenchmarkDetectionLatency).
		var ramps []detectSample // t0: the ramp's start, t1: the signal
		var cross []time.Time
		for range n {
			f := fields(b, g.line(time.Minute), "ramp", 4)
			ramps = append(ramps, detectSample{t0: unixNano(b, f[0]), t1: unixNano(b, f[2])})
			cross = append(cross, unixNano(b, f[1]))
			extra += atoi(b, f[3])
			if tr != nil {
				tr.stop()
			}
		}
		g.wait(30 * time.Second)
		matchDecisions(b, g.stateDir, ramps)
		for i, r := range ramps {
			lat = append(lat, r.t1.Sub(cross[i]))
			if !r.decided.IsZero() {
				decide = append(decide, r.decided.Sub(cross[i]))
			}
		}
		if tr != nil {
			r := ramps[0]
			tr.write(b, *rampTrace, traceRamp{Start: r.t0, Cross: cross[0], Signal: r.t1, Decided: r.decided})
		}
	}
	stats(b, "", "ms", lat)
	stats(b, "decide-", "ms", decide)
	b.ReportMetric(float64(len(lat)), "samples")
	b.ReportMetric(float64(extra), "extra-steps")
}

// BenchmarkJumpFromCalm is the time from GPU memory jumping from calm
// (0.50, below low, flat for 8-9 s, so polled every max_interval = 1 s)
// to above high (0.95) to the notify signal at the child: the price of
// polling slowly while calm. Same policy as BenchmarkRampDetection.
// from-calm counts the jumps whose last status before the jump showed a
// 1 s period (polled every 50 ms). Target: max <= max_interval + 10 ms.
func BenchmarkJumpFromCalm(b *testing.B) {
	defer reportLoad(b)()
	var lat []time.Duration
	var extra, fromCalm int
	for b.Loop() {
		lat, extra, fromCalm = lat[:0], 0, 0
		s := newSandbox(b)
		n := *jumpSamples
		g := s.start("jump", s.policy("jump", sensePolicy(2*n+1)), nil, childBin, "jump", strconv.Itoa(n),
			strconv.FormatUint(simTotal/2, 10), strconv.FormatUint(simTotal*95/100, 10), "8s")
		tr := startTracer(b, g, 50*time.Millisecond)
		for range n {
			f := fields(b, g.line(time.Minute), "jump", 3)
			t0, t1 := unixNano(b, f[0]), unixNano(b, f[1])
			lat = append(lat, t1.Sub(t0))
			extra += atoi(b, f[2])
			if tr.periodBefore(t0) == time.Second {
				fromCalm++
			}
		}
		tr.stop()
		g.wait(30 * time.Second)
	}
	stats(b, "", "ms", lat)
	b.ReportMetric(float64(len(lat)), "samples")
	b.ReportMetric(float64(fromCalm), "from-calm")
	b.ReportMetric(float64(extra), "extra-steps")
}

// tracer polls an instance's status socket and keeps every change of
// watermark or period, with the time it saw it.
type tracer struct {
	mu   sync.Mutex
	seen []tracePoint
	done chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

type tracePoint struct {
	Time      time.Time `json:"time"`
	Watermark float64   `json:"watermark"`
	Interval  float64   `json:"interval_seconds"`
	ETA       *float64  `json:"eta_seconds"`
}

func startTracer(b *testing.B, g *guard, every time.Duration) *tracer {
	b.Helper()
	ctx := context.Background()
	c := g.running(ctx)
	t := &tracer{done: make(chan struct{})}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		defer c.Close()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-t.done:
				return
			case <-tick.C:
			}
			st, err := c.Status(ctx)
			if err != nil {
				return // the instance ended
			}
			p := tracePoint{Time: time.Now(), Watermark: st.Watermark, Interval: st.IntervalSeconds, ETA: st.ETASeconds}
			t.mu.Lock()
			if n := len(t.seen); n == 0 || t.seen[n-1].Watermark != p.Watermark || t.seen[n-1].Interval != p.Interval {
				t.seen = append(t.seen, p)
			}
			t.mu.Unlock()
		}
	}()
	b.Cleanup(t.stop)
	return t
}

func (t *tracer) stop() {
	t.once.Do(func() { close(t.done) })
	t.wg.Wait()
}

// periodBefore is the polling period the status showed last before at.
func (t *tracer) periodBefore(at time.Time) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	var d float64
	for _, p := range t.seen {
		if p.Time.After(at) {
			break
		}
		d = p.Interval
	}
	return time.Duration(d * float64(time.Second))
}

// traceRamp is one ramp as the child and the journal saw it.
type traceRamp struct {
	Start   time.Time `json:"ramp_start"`
	Cross   time.Time `json:"crossed_high"`
	Signal  time.Time `json:"signal_at_child"`
	Decided time.Time `json:"stepdown_decided"`
}

// write saves the trace: the ramp's parameters and times, and the status
// changes seen from 2 s before the ramp to the signal, with the last one
// before that (the state the window opens in).
func (t *tracer) write(b *testing.B, path string, r traceRamp) {
	b.Helper()
	from, to := r.Start.Add(-2*time.Second), r.Signal.Add(300*time.Millisecond)
	t.mu.Lock()
	var pts []tracePoint
	for i, p := range t.seen {
		inside := !p.Time.Before(from) && !p.Time.After(to)
		opens := p.Time.Before(from) && (i+1 == len(t.seen) || !t.seen[i+1].Time.Before(from))
		if inside || opens {
			pts = append(pts, p)
		}
	}
	t.mu.Unlock()
	out := struct {
		Note     string       `json:"note"`
		From     float64      `json:"from"`
		Rate     float64      `json:"rate_per_second"`
		Low      float64      `json:"low"`
		High     float64      `json:"high"`
		Critical float64      `json:"critical"`
		Ramp     traceRamp    `json:"ramp"`
		Status   []tracePoint `json:"status"`
	}{"BenchmarkRampDetection -ramp.trace: the first ramp; status polled every 2 ms, one point per change (the first: the state before the window)",
		rampFrom, rampRate, 0.70, defHigh, 0.97, r, pts}
	raw, err := json.MarshalIndent(out, "", " ")
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(path, append(raw, '\n'), 0o644); err != nil {
		b.Fatal(err)
	}
}
