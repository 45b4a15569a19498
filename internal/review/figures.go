package review

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/report"
)

// row is one line of the figures table.
type row struct {
	Name, Value string
}

// Deferred-task events (the contract's Deferred tasks section); the page
// counts them by name, so it needs no more of that feature than this.
var taskEvents = []struct{ event, label string }{
	{"deferred", "deferred"}, {"task_done", "done"}, {"task_failed", "failed"},
	{"task_dead", "dead"}, {"task_dropped", "dropped"},
}

// figures are report's figures of the period, as the text report has
// them, plus the admissions by priority, which the journal's lines of the
// period give.
func figures(s report.Summary, evs []api.Event, since time.Time) []row {
	rows := []row{
		{"step-downs", count(s.Stepdowns, s.StepdownsByReason)},
		{"step-ups", fmt.Sprint(s.Stepups)},
		{"OOM fallbacks", fmt.Sprintf("%d of %d OOM exits", s.OOMFallbacks, s.OOMs)},
		{"restarts", count(report.Sum(s.Restarts), s.Restarts)},
		{"supervised", fmtDuration(secs(s.SupervisedSeconds))},
	}
	for _, p := range byLevel(s) {
		share := 0.0
		if s.SupervisedSeconds > 0 {
			share = s.SecondsInProfile[p] / s.SupervisedSeconds
		}
		rows = append(rows, row{"in " + p, fmt.Sprintf("%s (%s)", fmtDuration(secs(s.SecondsInProfile[p])), pct(share))})
	}
	if s.FirstProfile != "" {
		rows = append(rows,
			row{"fallback rate", fmt.Sprintf("%s below %s, the first profile started", pct(s.FallbackRate), s.FirstProfile)},
			row{"degraded rate", fmt.Sprintf("%s below %s, the ladder's first (budget %s)", pct(s.DegradedRate), s.BestProfile(), pct(s.Budget))})
	}
	rows = append(rows,
		row{"admissions", admissions(s, evs, since)},
		row{"yields", count(s.Yields, s.YieldsTo)},
		row{"GPU faults", fmt.Sprint(s.Count(api.EventGPUFault))},
		row{"reloads", fmt.Sprint(s.Count(api.EventReload))},
		row{"give-ups", fmt.Sprint(s.GiveUps)},
		row{"deferred tasks", tasks(s)},
	)
	return rows
}

// admissions is by decision (report's count), each split by priority as
// the period's admission lines have it.
func admissions(s report.Summary, evs []api.Event, since time.Time) string {
	by := map[string]map[string]int{}
	for _, ev := range evs {
		if ev.Event != api.EventAdmission || ev.Time.Before(since) {
			continue
		}
		d := cmp.Or(ev.Decision, "unknown")
		if by[d] == nil {
			by[d] = map[string]int{}
		}
		if ev.Count > 0 {
			for p, n := range ev.ByPriority {
				by[d][p] += n
			}
			continue
		}
		by[d][cmp.Or(ev.Priority, "P1")]++ // admission treats no priority as P1
	}
	var parts []string
	for _, d := range slices.Sorted(maps.Keys(s.Admissions)) {
		if n := s.Admissions[d]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d%s", d, n, report.ByKey(by[d])))
		}
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, "; ")
}

func tasks(s report.Summary) string {
	var parts []string
	for _, t := range taskEvents {
		if n := s.Count(t.event); n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", t.label, n))
		}
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, ", ")
}

// count is "3 (a 1, b 2)", as the text report has it.
func count(n int, by map[string]int) string { return fmt.Sprint(n) + report.ByKey(by) }

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// byLevel lists the profiles with time, best first.
func byLevel(s report.Summary) []string {
	names := slices.Collect(maps.Keys(s.SecondsInProfile))
	slices.SortFunc(names, func(a, b string) int {
		la, _ := s.Level(a)
		lb, _ := s.Level(b)
		return cmp.Or(cmp.Compare(la, lb), cmp.Compare(a, b))
	})
	return names
}

// legendItem explains one mark.
type legendItem struct {
	Class, D, Text string
}

func legend() []legendItem {
	var out []legendItem
	for _, k := range markKinds {
		out = append(out, legendItem{Class: "m m-" + k.event, D: k.shape(8, 7), Text: k.label})
	}
	return out
}
