package e2e

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// TestFiguresMakingRoom measures, on the fakes (two vLLM-sleep fakes of
// 10 GiB awake on one 16 GiB sim GPU, keep_awake = 0), the figures of
// docs/performance.md's "Making room" section, in one run:
//
//  1. a request for a sleeping model to its answer when its neighbour must
//     sleep first, against the same wake with the memory free (the two
//     alternate, 20 rounds each);
//  2. 100 requests alternating between the two models: failures, swaps,
//     and the median latency.
//
// It runs only with GPUGUARD_FIGURES=1:
//
//	GPUGUARD_FIGURES=1 go test ./e2e -run TestFiguresMakingRoom -v
//
// Serial: it times latencies, which other tests' load would stretch.
func TestFiguresMakingRoom(t *testing.T) {
	if os.Getenv("GPUGUARD_FIGURES") != "1" {
		t.Skip("figures: set GPUGUARD_FIGURES=1")
	}
	e := newEnv(t)
	o := bigModel()
	o.keepAwake = "0s"
	a, b := e.startAsleepAwake("a", o, "b", o)

	// 1. x asleep, y awake and idle: x's request makes room (y sleeps);
	// then x is stepped down by hand, and its next request wakes it with
	// the memory free. x and y swap for the next round.
	const rounds = 20
	var room, free []time.Duration
	x, y := a, b
	for range rounds {
		code, took := x.get("")
		if code != 200 {
			t.Fatalf("a wake that makes room: %d", code)
		}
		room = append(room, took)
		x.sleep()
		code, took = x.get("")
		if code != 200 {
			t.Fatalf("a wake with free memory: %d", code)
		}
		free = append(free, took)
		x, y = y, x
	}
	sleeps := actionSeconds(a, "/sleep?level=1&mode=wait")
	sleeps = append(sleeps, actionSeconds(b, "/sleep?level=1&mode=wait")...)

	// 2. 100 requests, alternating: each one's model is asleep, and the
	// other must sleep first.
	swapsBefore := len(a.roomDowns()) + len(b.roomDowns())
	var lat []time.Duration
	fails := 0
	for i := range 100 {
		code, took, err := []*model{a, b}[i%2].try("")
		if err != nil || code != 200 {
			fails++
			continue
		}
		lat = append(lat, took)
	}
	swaps := len(a.roomDowns()) + len(b.roomDowns()) - swapsBefore

	t.Logf("GPU poll interval 50ms, keep_awake 0s, fakes load in 0s")
	t.Logf("1. request for a sleeping model to its answer, median of %d: with free memory %s; when a peer must sleep first %s (overhead %s); the peer's sleep action itself, median %s",
		rounds, median(free), median(room), median(room)-median(free), median(sleeps))
	t.Logf("2. 100 alternating requests: %d failed, %d swaps, median latency %s (max %s)", fails, swaps, median(lat), slices.Max(lat))
	if fails > 0 {
		t.Errorf("%d of 100 alternating requests failed", fails)
	}
	a.stop()
	b.stop()
}

// actionSeconds are the durations of m's action events on path.
func actionSeconds(m *model, path string) []time.Duration {
	var out []time.Duration
	for _, ev := range m.events(api.EventAction) {
		if ev.Path == path {
			out = append(out, time.Duration(ev.Seconds*float64(time.Second)))
		}
	}
	return out
}

// median is the median of ds (0 for none).
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
