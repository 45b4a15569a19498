package review

import (
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/report"
)

// t0 is when the fixed journals begin; the page is written at t0+30m.
var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func lv(l int) *int { return &l }

// minutes are watermark records from minute a to minute b (exclusive),
// the mean rising by step a minute from base.
func minutes(name, gpu, profile string, level, a, b int, base, step float64) []api.Event {
	var out []api.Event
	for m := a; m < b; m++ {
		mean := base + step*float64(m-a)
		out = append(out, api.Event{Time: at(time.Duration(m+1) * time.Minute), Name: name, Event: api.EventWatermark,
			Profile: profile, Level: level, GPU: gpu,
			Minute: &api.Minute{Min: mean - 0.05, Mean: mean, Max: mean + 0.04, Samples: 300, High: 0.9, Critical: 0.97}})
	}
	return out
}

// sortByTime puts the events in journal order.
func merge(parts ...[]api.Event) []api.Event {
	var out []api.Event
	for _, p := range parts {
		out = append(out, p...)
	}
	for i := 1; i < len(out); i++ { // insertion sort: stable, and the fixtures are small
		for j := i; j > 0 && out[j].Time.Before(out[j-1].Time); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// alphaEvents: fp16, a watermark step to int8, an OOM and the restart
// into int4, a yield to beta, a GPU fault, a reload and the exit.
func alphaEvents() []api.Event {
	n := "alpha"
	return merge(
		[]api.Event{
			{Time: at(0), Name: n, Event: api.EventStart, Profile: "fp16", Level: 0},
			{Time: at(10 * time.Minute), Name: n, Event: api.EventStepDown, Reason: api.ReasonWatermark, Profile: "fp16", Level: 0,
				From: "fp16", To: "int8", FromLevel: lv(0), ToLevel: lv(1), Watermark: 0.93},
			{Time: at(12 * time.Minute), Name: n, Event: api.EventAdmission, Profile: "int8", Level: 1, Decision: "gpu", Count: 3,
				ByPriority: map[string]int{"P0": 2, "P2": 1}},
			{Time: at(13 * time.Minute), Name: n, Event: api.EventAdmission, Profile: "int8", Level: 1, Decision: "deny", Priority: "P0"},
			{Time: at(20 * time.Minute), Name: n, Event: api.EventExit, Profile: "int8", Level: 1, Status: lv(1)},
			{Time: at(20 * time.Minute), Name: n, Event: api.EventOOM, Profile: "int8", Level: 1, Detail: "stderr matched CUDA out of memory"},
			{Time: at(20*time.Minute + time.Second), Name: n, Event: api.EventRestart, Reason: api.ReasonOOM, Profile: "int8", Level: 1,
				From: "int8", To: "int4", FromLevel: lv(1), ToLevel: lv(2)},
			{Time: at(20*time.Minute + 5*time.Second), Name: n, Event: api.EventStart, Profile: "int4", Level: 2},
			{Time: at(25 * time.Minute), Name: n, Event: api.EventYield, Profile: "int4", Level: 2, To: "beta", GPU: "GPU-a",
				Reason: api.ReasonWatermark},
			{Time: at(26 * time.Minute), Name: n, Event: api.EventGPUFault, Profile: "int4", Level: 2, GPU: "GPU-a", Xid: 13,
				Detail: "graphics engine exception"},
			{Time: at(27 * time.Minute), Name: n, Event: api.EventReload, Profile: "int4", Level: 2, Changed: []string{"watermark.high"}},
			{Time: at(29 * time.Minute), Name: n, Event: api.EventExit, Profile: "int4", Level: 2, Status: lv(0)},
		},
		minutes(n, "GPU-a", "fp16", 0, 0, 10, 0.6, 0.03),
		minutes(n, "GPU-a", "int8", 1, 10, 20, 0.7, 0.02),
		minutes(n, "GPU-a", "int4", 2, 21, 29, 0.5, 0.01),
	)
}

// betaEvents: starts in int8 (fp16 never fit: its fit event names it),
// steps down once, and still runs when the page is written.
func betaEvents() []api.Event {
	n := "beta"
	return merge(
		[]api.Event{
			{Time: at(5 * time.Minute), Name: n, Event: api.EventFit, Profile: "int8", Level: 1, Tried: []api.FitTry{
				{Profile: "fp16", Level: 0, NeedsBytes: 40 << 30}, {Profile: "int8", Level: 1, NeedsBytes: 8 << 30, Fits: true}}},
			{Time: at(5 * time.Minute), Name: n, Event: api.EventStart, Profile: "int8", Level: 1},
			{Time: at(25 * time.Minute), Name: n, Event: api.EventStepDown, Reason: api.ReasonCritical, Profile: "int8", Level: 1,
				From: "int8", To: "int4", FromLevel: lv(1), ToLevel: lv(2), Watermark: 0.98},
		},
		minutes(n, "GPU-a", "int8", 1, 5, 25, 0.8, 0.008),
		minutes(n, "GPU-a", "int4", 2, 25, 30, 0.7, 0),
	)
}

// hostile is an instance whose journal names it with markup.
const hostile = `x"><script>alert(1)</script>`

func hostileEvents() []api.Event {
	return []api.Event{
		{Time: at(0), Name: hostile, Event: api.EventStart, Profile: "<b>fp16</b>", Level: 0},
		{Time: at(2 * time.Minute), Name: hostile, Event: api.EventGiveUp, Profile: "<b>fp16</b>", Level: 0,
			Detail: "</title><script>alert(2)</script>"},
		{Time: at(2 * time.Minute), Name: hostile, Event: api.EventExit, Profile: "<b>fp16</b>", Level: 0},
	}
}

var fixedNow = at(30 * time.Minute)

// instance summarises evs as `report --html` does: the last week, live or
// not, against the default budget.
func instance(evs []api.Event, live bool) Instance {
	s := report.SummarizeSince(evs, fixedNow.Add(-7*24*time.Hour), fixedNow, live)
	s.SetBudget(report.DefaultBudget)
	return Instance{Summary: s, Events: evs}
}

func fixedOptions() Options {
	return Options{Since: fixedNow.Add(-7 * 24 * time.Hour), Until: fixedNow, Budget: report.DefaultBudget}
}
