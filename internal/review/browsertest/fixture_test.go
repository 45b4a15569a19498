package browsertest

import (
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/journal"
)

// The journals are written relative to now, which the page's default
// period (the last 7 days) must cover.
var now = time.Now().UTC().Truncate(time.Minute)

func ago(d time.Duration) time.Time { return now.Add(-d) }

func lv(l int) *int { return &l }

// writeJournal writes evs (named name) to <root>/<dir>/events.jsonl
// through the real journal, rotating at maxBytes; every file is kept.
func writeJournal(t *testing.T, root, dir, name string, maxBytes int64, evs []api.Event) {
	t.Helper()
	j, err := journal.Open(filepath.Join(root, dir, "events.jsonl"),
		journal.Options{Limits: journal.Limits{MaxBytes: maxBytes, MaxFiles: 1000}, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range evs {
		ev.Name = name
		j.Observe(ev)
		if i%500 == 499 {
			j.Flush() // the queue drops what it cannot hold
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if j.Dropped() != 0 {
		t.Fatalf("the journal dropped %d events", j.Dropped())
	}
}

// minutes are watermark records for the minutes from a to b ago, the mean
// following f(minutes ago).
func minutes(gpu, profile string, level int, a, b time.Duration, f func(m float64) float64) []api.Event {
	var out []api.Event
	for t := a; t > b; t -= time.Minute {
		m := f(t.Minutes())
		out = append(out, api.Event{Time: ago(t - time.Minute), Event: api.EventWatermark, Profile: profile, Level: level, GPU: gpu,
			Minute: &api.Minute{Min: m - 0.04, Mean: m, Max: m + 0.03, Samples: 60, High: 0.9, Critical: 0.97}})
	}
	return out
}

func wave(base, amp, period float64) func(float64) float64 {
	return func(m float64) float64 { return base + amp*math.Sin(2*math.Pi*m/period) }
}

// sortByTime puts events in journal order (stable).
func sortByTime(evs []api.Event) []api.Event {
	out := slices.Clone(evs)
	slices.SortStableFunc(out, func(a, b api.Event) int { return a.Time.Compare(b.Time) })
	return out
}

// alpha runs 3 hours in fp16 on the shared GPU, with a 5 minute dip to
// int8 (2.8 %: within budget), an OOM exit and its restart, a yield to
// beta, a fault, a reload.
func alpha() []api.Event {
	g := "GPU-6f1c2a"
	evs := []api.Event{
		{Time: ago(3 * time.Hour), Event: api.EventStart, Profile: "fp16", Level: 0},
		{Time: ago(2 * time.Hour), Event: api.EventStepDown, Reason: api.ReasonWatermark, Profile: "fp16", From: "fp16", To: "int8",
			FromLevel: lv(0), ToLevel: lv(1), Watermark: 0.93, Detail: "watermark 0.93 > 0.90 for 1s"},
		{Time: ago(115 * time.Minute), Event: api.EventStepUp, Reason: api.ReasonRecovered, Profile: "int8", Level: 1, From: "int8",
			To: "fp16", FromLevel: lv(1), ToLevel: lv(0)},
		{Time: ago(90 * time.Minute), Event: api.EventExit, Profile: "fp16", Status: lv(1)},
		{Time: ago(90 * time.Minute), Event: api.EventOOM, Profile: "fp16", Detail: "stderr matched CUDA out of memory"},
		{Time: ago(90*time.Minute - time.Second), Event: api.EventRestart, Reason: api.ReasonCrash, Profile: "fp16", From: "fp16",
			To: "fp16", FromLevel: lv(0), ToLevel: lv(0)},
		{Time: ago(90*time.Minute - 2*time.Second), Event: api.EventStart, Profile: "fp16"},
		{Time: ago(60 * time.Minute), Event: api.EventYield, Profile: "fp16", To: "beta", GPU: g, Reason: api.ReasonWatermark},
		{Time: ago(40 * time.Minute), Event: api.EventGPUFault, Profile: "fp16", GPU: g, Xid: 13, Detail: "graphics engine exception"},
		{Time: ago(20 * time.Minute), Event: api.EventReload, Profile: "fp16", Changed: []string{"watermark.high"}},
		{Time: ago(12 * time.Minute), Event: api.EventAdmission, Profile: "fp16", Decision: "gpu", Count: 4, ByPriority: map[string]int{"P0": 4}},
		{Time: ago(11 * time.Minute), Event: api.EventAdmission, Profile: "fp16", Decision: "cpu", Priority: "P1"},
	}
	evs = append(evs, minutes(g, "fp16", 0, 3*time.Hour, 0, wave(0.72, 0.15, 50))...)
	return sortByTime(evs)
}

// beta shares alpha's GPU; its fp16 never fits, so it runs in int8 and
// int4 all the time: over budget, mostly in int8.
func beta() []api.Event {
	g := "GPU-6f1c2a"
	evs := []api.Event{
		{Time: ago(150 * time.Minute), Event: api.EventStart, Profile: "int8", Level: 1},
		{Time: ago(60 * time.Minute), Event: api.EventStepDown, Reason: api.ReasonCritical, Profile: "int8", Level: 1, From: "int8",
			To: "int4", FromLevel: lv(1), ToLevel: lv(2), Watermark: 0.98},
		{Time: ago(30 * time.Minute), Event: api.EventGiveUp, Profile: "int4", Level: 2, Detail: "10 restarts within 10m0s"},
		{Time: ago(30 * time.Minute), Event: api.EventExit, Profile: "int4", Level: 2},
	}
	evs = append(evs, minutes(g, "int8", 1, 150*time.Minute, 60*time.Minute, wave(0.8, 0.08, 40))...)
	evs = append(evs, minutes(g, "int4", 2, 60*time.Minute, 30*time.Minute, wave(0.6, 0.05, 40))...)
	return sortByTime(evs)
}

// hostileName is a journal's name with markup and quotes in it.
const hostileName = `g<amma>"&'`

func gamma() []api.Event {
	return []api.Event{
		{Time: ago(10 * time.Minute), Event: api.EventStart, Profile: "<i>fp16</i>", Level: 0},
		{Time: ago(5 * time.Minute), Event: api.EventExit, Profile: "<i>fp16</i>", Level: 0},
	}
}

// busyWeek is 7 days of minute records and 10,000 marked events, one
// every minute or so, of every kind.
func busyWeek() []api.Event {
	g := "GPU-b0b0"
	kinds := []api.Event{
		{Event: api.EventStepDown, Reason: api.ReasonWatermark, From: "fp16", To: "int8", FromLevel: lv(0), ToLevel: lv(1), Watermark: 0.92},
		{Event: api.EventStepUp, Reason: api.ReasonRecovered, From: "int8", To: "fp16", FromLevel: lv(1), ToLevel: lv(0)},
		{Event: api.EventYield, To: "other", GPU: g, Reason: api.ReasonWatermark},
		{Event: api.EventStepDown, Reason: api.ReasonPredicted, From: "fp16", To: "int8", FromLevel: lv(0), ToLevel: lv(1)},
		{Event: api.EventStepUp, Reason: api.ReasonManual, From: "int8", To: "fp16", FromLevel: lv(1), ToLevel: lv(0)},
		{Event: api.EventReload, Changed: []string{}},
		{Event: api.EventGPUFault, GPU: g, Xid: 31},
		{Event: api.EventRestart, Reason: api.ReasonWatermark, From: "fp16", To: "fp16", FromLevel: lv(0), ToLevel: lv(0)},
	}
	start := ago(7*24*time.Hour - time.Hour)
	evs := []api.Event{{Time: start, Event: api.EventStart, Profile: "fp16"}}
	span := now.Sub(start) - 2*time.Minute
	for i := range 10000 {
		ev := kinds[i%len(kinds)]
		ev.Time = start.Add(time.Duration(i+1) * span / 10001)
		ev.Profile = "fp16"
		if ev.From != "" {
			ev.Profile = ev.From
		}
		evs = append(evs, ev)
	}
	evs = append(evs, minutes(g, "fp16", 0, now.Sub(start), time.Minute, wave(0.7, 0.2, 24*60))...)
	return sortByTime(evs)
}

// writePage runs `gpuguard report --html` over every journal under root.
func writePage(t *testing.T, root string) string {
	t.Helper()
	page := filepath.Join(t.TempDir(), "review.html")
	cmd := exec.Command(gpuguardBin, "report", "--html", page)
	cmd.Env = append(os.Environ(), "GPUGUARD_STATE_DIR="+root, "GPUGUARD_RUNTIME_DIR="+t.TempDir(), "TZ=UTC")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("report --html: %v\n%s", err, out)
	}
	return page
}
