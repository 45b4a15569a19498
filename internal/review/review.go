package review

import (
	"cmp"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"slices"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/report"
)

// Instance is one instance's part of the page: report's summary of the
// period, and the journal it was made from (oldest first; lines before
// the period too, so the timeline knows what ran when it opened).
type Instance struct {
	Summary report.Summary
	Events  []api.Event
}

// Options say which period the page covers and how it shows times.
type Options struct {
	// Since and Until bound the period asked for (`--since`, now).
	Since, Until time.Time
	// Budget is the degraded rate the verdicts judge by.
	Budget float64
	// Location is the zone times are shown in; nil means UTC.
	Location *time.Location
}

//go:embed page.tmpl
var pageText string

// pageTmpl is parsed once per Write: a template is cheap to parse, and a
// package-level one would be a global.
func pageTmpl() (*template.Template, error) {
	return template.New("page").Funcs(template.FuncMap{"f1": f1}).Parse(pageText)
}

// Write writes the review page of insts to w. The sections are ordered by
// name; the page says when there is nothing to show.
func Write(w io.Writer, insts []Instance, o Options) error {
	t, err := pageTmpl()
	if err != nil {
		return fmt.Errorf("parsing the page template: %w", err)
	}
	if err := t.Execute(w, build(insts, o)); err != nil {
		return fmt.Errorf("writing the review page: %w", err)
	}
	return nil
}

// page is what the template shows.
type page struct {
	Period    string
	Budget    string
	Empty     bool
	Sections  []section
	Legend    []legendItem
	Generated string
}

// section is one instance.
type section struct {
	Name, ID string
	Live     bool
	GPUs     []gpuShare
	Nothing  bool // nothing happened in the period
	Timeline timeline
	Figures  []row
	Verdict  string
	Over     bool
}

// gpuShare is a GPU the instance watched and the other instances on the
// page that watched it too.
type gpuShare struct {
	UUID   string
	Others []string
}

func build(insts []Instance, o Options) page {
	loc := cmp.Or(o.Location, time.UTC)
	insts = slices.Clone(insts)
	slices.SortStableFunc(insts, func(a, b Instance) int { return cmp.Compare(a.Summary.Name, b.Summary.Name) })
	from, to := axisSpan(insts, o)
	ax := newAxis(from, to, loc)
	p := page{
		Period: fmt.Sprintf("%s to %s (%s)", fmtTime(ax.from, loc), fmtTime(ax.to, loc), fmtDuration(ax.to.Sub(ax.from))),
		Budget: pct(o.Budget), Empty: true, Legend: legend(),
		Generated: fmtTime(o.Until, loc),
	}
	gpus := map[string][]string{} // GPU -> instances
	perInst := make([][]string, len(insts))
	for i, in := range insts {
		perInst[i] = watchedGPUs(in.Events, o.Since)
		for _, g := range perInst[i] {
			gpus[g] = append(gpus[g], in.Summary.Name)
		}
	}
	for i, in := range insts {
		s := in.Summary
		sec := section{Name: s.Name, ID: "i-" + s.Name, Live: s.Live, Verdict: s.Verdict(), Over: s.OverBudget,
			Nothing: s.SupervisedSeconds == 0 && s.Events == 0}
		if !sec.Nothing {
			p.Empty = false
			sec.Timeline = drawTimeline(ax, in.Events, s.Until, o.Since)
			sec.Figures = figures(s, in.Events, o.Since)
		}
		for _, g := range perInst[i] {
			sec.GPUs = append(sec.GPUs, gpuShare{UUID: g, Others: slices.DeleteFunc(slices.Clone(gpus[g]),
				func(n string) bool { return n == s.Name })})
		}
		p.Sections = append(p.Sections, sec)
	}
	return p
}

// axisSpan is the union of the instances' periods: from the earliest
// since (report moves it to the journal's first line when the journal is
// younger than the period) to the latest until.
func axisSpan(insts []Instance, o Options) (from, to time.Time) {
	for _, in := range insts {
		s := in.Summary
		if s.SupervisedSeconds == 0 && s.Events == 0 {
			continue
		}
		if from.IsZero() || s.Since.Before(from) {
			from = s.Since
		}
		if s.Until.After(to) {
			to = s.Until
		}
	}
	if from.IsZero() {
		from, to = o.Since, o.Until
	}
	if from.Before(o.Since) {
		from = o.Since
	}
	if to.Sub(from) < time.Minute {
		to = from.Add(time.Minute)
	}
	return from, to
}

// watchedGPUs lists the GPUs the instance's records of the period name
// (watermark records, yields, faults), sorted.
func watchedGPUs(evs []api.Event, since time.Time) []string {
	seen := map[string]bool{}
	for _, ev := range evs {
		if ev.GPU != "" && !ev.Time.Before(since) {
			seen[ev.GPU] = true
		}
	}
	var out []string
	for g := range seen {
		out = append(out, g)
	}
	slices.Sort(out)
	return out
}
