package bench

import (
	"bufio"
	"flag"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/journal"
)

var detectSamples = flag.Int("detect.samples", 200, "detection latency: number of crossings measured")

// detectSample is one crossing: the child's t0 (usage above high) and t1
// (signal received), and gpuguard's decision time from its journal.
type detectSample struct {
	t0, t1, decided time.Time
}

// BenchmarkDetectionLatency is the time from the child's GPU memory crossing
// `high` to the notify signal (SIGUSR1) arriving at the child: real binary,
// sim backend, --interval 100ms, sustain = 0, grace = 0, a ladder of live
// profiles. The child takes both timestamps itself: t0 right before it
// writes its sim usage file above high (temp file + rename), t1 when the
// signal arrives; then it writes low usage and pauses a random 1-2
// intervals, so crossings fall at random points of the polling period.
// Each crossing steps one live profile down, so one run of gpuguard gives
// up to 120 samples (the ladder has room for double steps).
//
// The split uses the stepdown event's time in gpuguard's journal (taken
// when the loop decides): decide = t0 -> decision (waiting for the next
// tick, then the probe), notify = decision -> signal at the child (state
// file write, kill(2), signal delivery). extra-steps counts crossings that
// stepped twice because the child had not yet written low usage when the
// next sample was taken (it discards the stale signal).
// signal-baseline is kill(2) in this process -> the same child's channel
// receive, the child idle between signals: the part of notify that no
// supervisor can avoid on this machine.
// Targets: median <= interval/2 + 5 ms, max <= interval + 10 ms.
func BenchmarkDetectionLatency(b *testing.B) {
	defer reportLoad(b)()
	const interval = 100 * time.Millisecond
	const total = 16 << 30 // --sim-memory default
	var samples []detectSample
	var extra int
	for b.Loop() {
		samples, extra = samples[:0], 0
		for run := 0; len(samples) < *detectSamples; run++ {
			n := min(*detectSamples-len(samples), 120)
			s, e := detectRun(b, run, n, interval, total)
			samples, extra = append(samples, s...), extra+e
		}
	}
	reportDetection(b, samples, extra)
	stats(b, "signal-baseline-", "ms", signalBaseline(b, 50))
}

// reportDetection reports crossing -> signal, its decide and notify parts,
// the sample count and the extra steps.
func reportDetection(b *testing.B, samples []detectSample, extra int) {
	b.Helper()
	var lat, decide, notify []time.Duration
	for _, s := range samples {
		lat = append(lat, s.t1.Sub(s.t0))
		if !s.decided.IsZero() {
			decide = append(decide, s.decided.Sub(s.t0))
			notify = append(notify, s.t1.Sub(s.decided))
		}
	}
	stats(b, "", "ms", lat)
	stats(b, "decide-", "ms", decide)
	stats(b, "notify-", "ms", notify)
	b.ReportMetric(float64(len(lat)), "samples")
	b.ReportMetric(float64(extra), "extra-steps")
}

func detectRun(b *testing.B, run, n int, interval time.Duration, total uint64) ([]detectSample, int) {
	s := newSandbox(b)
	var pol strings.Builder
	fmt.Fprintf(&pol, `[watch]
interval = %q
[watermark]
high = 0.5
critical = 0.99
low = 0.2
sustain = "0s"
grace = "0s"
recover_after = "0s"
[notify]
signal = "SIGUSR1"
`, interval)
	for i := range min(2*n+1, 256) {
		fmt.Fprintf(&pol, "[[profile]]\nname = \"p%d\"\nlive = true\n", i)
	}
	return detectWith(b, s, fmt.Sprintf("detect%d", run), pol.String(), nil, n, total, interval)
}

// detectWith runs one gpuguard (name, policy, flags) around `benchchild
// detect` for n crossings of total*0.8 bytes, pausing interval to
// 2*interval between them, and returns the samples (decided from the
// journal) and the extra steps.
func detectWith(b *testing.B, s *sandbox, name, policy string, flags []string, n int, total uint64, interval time.Duration) ([]detectSample, int) {
	b.Helper()
	high, low := strconv.FormatUint(total*8/10, 10), strconv.FormatUint(total/10, 10)
	g := s.start(name, s.policy("detect", policy), flags,
		childBin, "detect", strconv.Itoa(n), high, low, interval.String())
	var out []detectSample
	extra := 0
	for range n {
		f := fields(b, g.line(time.Minute), "detect", 3)
		out = append(out, detectSample{t0: unixNano(b, f[0]), t1: unixNano(b, f[1])})
		extra += atoi(b, f[2])
	}
	g.wait(30 * time.Second)
	matchDecisions(b, g.stateDir, out)
	return out, extra
}

// matchDecisions sets each sample's decided from the stepdown events in
// the journal of the instance in stateDir: the first at or after its t0,
// if it came before its t1.
func matchDecisions(b *testing.B, stateDir string, out []detectSample) {
	b.Helper()
	evs, _, err := journal.Read(filepath.Join(stateDir, "events.jsonl"), time.Time{})
	if err != nil {
		b.Fatal(err)
	}
	j := 0
	for i := range out {
		for ; j < len(evs); j++ {
			ev := evs[j]
			if ev.Event == api.EventStepDown && !ev.Time.Before(out[i].t0) {
				if !ev.Time.After(out[i].t1) {
					out[i].decided = ev.Time
				}
				break
			}
		}
	}
}

func unixNano(b *testing.B, s string) time.Time {
	b.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		b.Fatal(err)
	}
	return time.Unix(0, n)
}

func atoi(b *testing.B, s string) int {
	b.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// signalBaseline sends SIGUSR1 n times to an idle benchchild: kill(2) ->
// the child has the signal from its channel.
func signalBaseline(b *testing.B, n int) []time.Duration {
	b.Helper()
	cmd := exec.Command(childBin, "sigwait", strconv.Itoa(n))
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer cmd.Wait()
	sc := bufio.NewScanner(out)
	if !sc.Scan() || sc.Text() != "ready" {
		b.Fatal("benchchild sigwait did not start")
	}
	var ds []time.Duration
	for range n {
		time.Sleep(50*time.Millisecond + rand.N(50*time.Millisecond)) // let it go idle
		t0 := time.Now()
		if err := cmd.Process.Signal(syscall.SIGUSR1); err != nil {
			b.Fatal(err)
		}
		if !sc.Scan() {
			b.Fatal("benchchild sigwait ended early")
		}
		ds = append(ds, unixNano(b, fields(b, sc.Text(), "signal", 1)[0]).Sub(t0))
	}
	return ds
}
