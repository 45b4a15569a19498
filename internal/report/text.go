package report

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gpuguard/gpuguard/internal/safetext"
)

// WriteText writes the summary for a person.
func (s Summary) WriteText(w io.Writer) error {
	p := &printer{w: w}
	state := "not running"
	if s.Live {
		state = "live"
	}
	p.f("%s (%s)\n", nameOr(s.Name), state)
	p.f("  window         %s .. %s (%s)\n", s.Since.Format(time.RFC3339), s.Until.Format(time.RFC3339),
		s.Until.Sub(s.Since).Round(time.Second))
	p.f("  stepdowns      %d%s\n", s.Stepdowns, ByKey(s.StepdownsByReason))
	p.f("  stepups        %d\n", s.Stepups)
	if s.ObservedStepdowns > 0 {
		p.f("  observe mode   %d step-down(s) would have happened\n", s.ObservedStepdowns)
	}
	p.f("  OOM fallbacks  %d (of %d OOM exits)\n", s.OOMFallbacks, s.OOMs)
	p.f("  restarts       %d%s\n", Sum(s.Restarts), ByKey(s.Restarts))
	if s.CriticalAtLast > 0 {
		p.f("  critical       %d time(s) above critical at the last profile\n", s.CriticalAtLast)
	}
	if s.GiveUps > 0 {
		p.f("  gave up        %d time(s)\n", s.GiveUps)
	}
	if s.ProbeErrors > 0 {
		p.f("  probe errors   %d\n", s.ProbeErrors)
	}
	if s.Yields > 0 {
		p.f("  yields         %d to other tenants of a shared GPU%s\n", s.Yields, ByKey(s.YieldsTo))
	}
	if t := s.Tasks; t.Deferred+t.Done+t.Dead > 0 {
		wait := ""
		if t.MedianWaitSeconds != nil {
			wait = ", median wait " + fmtSeconds(*t.MedianWaitSeconds)
		}
		p.f("  deferred tasks %d deferred, %d done, %d dead%s\n", t.Deferred, t.Done, t.Dead, wait)
	}
	if len(s.Admissions) > 0 {
		p.f("  admissions     %d%s\n", Sum(s.Admissions), ByKey(s.Admissions))
	}
	p.f("  supervised     %s\n", fmtSeconds(s.SupervisedSeconds))
	for _, prof := range s.profilesByLevel() {
		secs := s.SecondsInProfile[prof]
		p.f("    %-12s %10s  %5.1f%%\n", prof, fmtSeconds(secs), 100*secs/s.SupervisedSeconds)
	}
	if s.FirstProfile != "" {
		p.f("  fallback rate  %.1f%% of supervised time below %s (the first profile started)\n", 100*s.FallbackRate, s.FirstProfile)
		p.f("  degraded rate  %.1f%% of supervised time below %s (the ladder's first profile; budget %.1f%%)\n",
			100*s.DegradedRate, s.BestProfile(), 100*s.Budget)
	}
	if len(s.TopOOMMessages) > 0 {
		p.f("  top OOM messages\n")
		for _, m := range s.TopOOMMessages {
			p.f("    %4d  %s\n", m.Count, m.Message)
		}
	}
	if s.SkippedLines > 0 {
		p.f("  note: skipped %d unreadable journal line(s) (torn by a crash, or being written)\n", s.SkippedLines)
	}
	if s.OverBudget {
		p.f("warning: %s\n", s.Verdict())
	}
	return p.err
}

// printer keeps the first write error so WriteText reads as a list of lines.
type printer struct {
	w   io.Writer
	err error
}

// f prints a line. Its string arguments come from the journal (reasons,
// profile names, a child's OOM messages), so they are escaped (safetext);
// the format is the report's own.
func (p *printer) f(format string, args ...any) {
	if p.err != nil {
		return
	}
	for i, a := range args {
		if s, ok := a.(string); ok {
			args[i] = safetext.Escape(s)
		}
	}
	_, p.err = fmt.Fprintf(p.w, format, args...)
}

func nameOr(name string) string {
	if name == "" {
		return "(unnamed instance)"
	}
	return name
}

// ByKey formats a count map as " (a 1, b 2)", keys sorted, zeros left
// out, as the text report prints a count's split; the review page uses it
// too, so both say the same.
func ByKey(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// Sum is the total of a count map.
func Sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func fmtSeconds(s float64) string {
	return (time.Duration(s * float64(time.Second))).Round(time.Second).String()
}

// Verdict is the weekly review's conclusion in one sentence: whether the
// degraded rate is above the budget, and if so, where the instance ran
// instead of its best profile. The text report prints it as a warning when
// over budget; the review page always shows it.
func (s Summary) Verdict() string {
	if s.SupervisedSeconds == 0 {
		return fmt.Sprintf("%s did not run a child in this period: nothing to judge", nameOr(s.Name))
	}
	if !s.OverBudget {
		return fmt.Sprintf("%s ran below its best profile %s %.1f%% of the time, within the budget of %.1f%%",
			nameOr(s.Name), s.BestProfile(), 100*s.DegradedRate, 100*s.Budget)
	}
	return fmt.Sprintf("%s ran below its best profile %s %.1f%% of the time (budget %.1f%%), mostly in %s: "+
		"raise the GPU memory budget, or make the first profile ask for less",
		nameOr(s.Name), s.BestProfile(), 100*s.DegradedRate, 100*s.Budget, s.MostDegraded())
}
