package review

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// timeline is one instance's picture, ready for the template.
type timeline struct {
	Height      float64
	Rows        []label // the marks' rows
	Marks       []mark
	Levels      []label // the profiles, best at the top
	LevelPath   string
	WMTop       float64
	WMBottom    float64
	Grid        []label // watermark percentages
	Band, Mean  []string
	High, Crit  string
	HighLabel   label
	CritLabel   label
	NoWatermark bool
	AxisY       float64
	TickEnd     float64
	LabelY      float64
	Ticks       []tick
}

// label is a text at a height.
type label struct {
	Y    float64
	Text string
}

// mark is one event's symbol.
type mark struct {
	Class, D, Title string
}

const (
	levelStep = 14.0
	wmHeight  = 100.0
)

func drawTimeline(ax axis, evs []api.Event, until time.Time, since time.Time) timeline {
	var tl timeline
	for i, k := range markKinds {
		tl.Rows = append(tl.Rows, label{Y: rowY(i), Text: k.label})
	}
	tl.Marks = marks(ax, evs, since)

	segs, names := levelSegments(evs, until)
	levels := 1
	for l := range names {
		levels = max(levels, l+1)
	}
	for _, s := range segs {
		levels = max(levels, s.level+1)
	}
	top := marksTop + float64(len(markKinds))*rowStep + 14
	levelY := func(l int) float64 { return top + levelStep*float64(l) }
	for l := range levels {
		name := names[l]
		if name == "" {
			name = fmt.Sprintf("level %d", l)
		}
		tl.Levels = append(tl.Levels, label{Y: levelY(l), Text: clip(name, 16)})
	}
	tl.LevelPath = levelPath(ax, segs, levelY)

	tl.WMTop = levelY(levels-1) + 18
	tl.WMBottom = tl.WMTop + wmHeight
	for _, r := range []float64{0, 0.5, 1} {
		tl.Grid = append(tl.Grid, label{Y: tl.wmY(r), Text: fmt.Sprintf("%.0f%%", 100*r)})
	}
	drawWatermark(&tl, ax, evs)
	tl.AxisY = tl.WMBottom + 6
	tl.TickEnd, tl.LabelY = tl.AxisY+4, tl.AxisY+14
	tl.Ticks = ax.ticks()
	tl.Height = tl.AxisY + 20
	return tl
}

func (tl *timeline) wmY(r float64) float64 {
	return tl.WMTop + wmHeight*(1-max(0, min(1, r)))
}

func rowY(i int) float64 { return marksTop + rowStep*float64(i) + rowStep/2 }

// seg is a stretch of time a child ran at one level.
type seg struct {
	from, to time.Time
	level    int
}

// levelSegments replays the journal: where a child ran, at which level,
// and each level's profile name (fit events name those that never ran). A totals record stands in for the start
// of a run whose first lines rotated away; a start with no exit before it
// (gpuguard died unrecorded) ends the previous stretch at the last line
// seen. The last stretch of a running child runs until until.
func levelSegments(evs []api.Event, until time.Time) ([]seg, map[int]string) {
	var (
		segs    []seg
		names   = map[int]string{}
		running bool
		cur     seg
		last    time.Time
	)
	open := func(at time.Time, level int) { running, cur = true, seg{from: at, level: level} }
	closeAt := func(at time.Time) {
		if running && at.After(cur.from) {
			cur.to = at
			segs = append(segs, cur)
		}
		running = false
	}
	for _, ev := range evs {
		if ev.Profile != "" && ev.Event != api.EventWatermark {
			names[ev.Level] = ev.Profile
		}
		if ev.To != "" && ev.ToLevel != nil {
			names[*ev.ToLevel] = ev.To
		}
		for _, tr := range ev.Tried { // a fit names the profiles a start tried
			names[tr.Level] = tr.Profile
		}
		switch ev.Event {
		case api.EventTotals:
			if !running && ev.Totals != nil && ev.Totals.Running {
				open(ev.Time, ev.Level)
			}
		case api.EventStart:
			closeAt(last)
			open(ev.Time, ev.Level)
		case api.EventStepDown, api.EventStepUp, api.EventRestart:
			if ev.ToLevel != nil {
				if running {
					closeAt(ev.Time)
					open(ev.Time, *ev.ToLevel)
				}
			}
		case api.EventExit:
			closeAt(ev.Time)
		}
		last = ev.Time
	}
	closeAt(until)
	return segs, names
}

// levelPath draws the stretches as a step line: joined vertically where
// one follows another at once, broken where no child ran.
func levelPath(ax axis, segs []seg, y func(int) float64) string {
	var b strings.Builder
	var prev *seg
	for i := range segs {
		s := &segs[i]
		if s.to.Before(ax.from) || s.from.After(ax.to) {
			continue
		}
		if prev != nil && prev.to.Equal(s.from) {
			fmt.Fprintf(&b, "V%sH%s", f1(y(s.level)), f1(ax.x(s.to)))
		} else {
			fmt.Fprintf(&b, "M%s %sH%s", f1(ax.x(s.from)), f1(y(s.level)), f1(ax.x(s.to)))
		}
		prev = s
	}
	return b.String()
}

// markKind is a kind of event the timeline marks, in its row's order.
type markKind struct {
	event, label string
	shape        func(x, y float64) string
}

var markKinds = []markKind{
	{api.EventStepDown, "step down", func(x, y float64) string { return fmt.Sprintf("M%s %sh8l-4 7z", f1(x-4), f1(y-3.5)) }},
	{api.EventStepUp, "step up", func(x, y float64) string { return fmt.Sprintf("M%s %sh8l-4-7z", f1(x-4), f1(y+3.5)) }},
	{api.EventOOM, "OOM exit", func(x, y float64) string { return fmt.Sprintf("M%s %sl7 7m0-7l-7 7", f1(x-3.5), f1(y-3.5)) }},
	{api.EventRestart, "restart", func(x, y float64) string {
		return fmt.Sprintf("M%s %sa3.5 3.5 0 1 0 7 0a3.5 3.5 0 1 0-7 0", f1(x-3.5), f1(y))
	}},
	{api.EventYield, "yield", func(x, y float64) string { return fmt.Sprintf("M%s %sl4 4-4 4-4-4z", f1(x), f1(y-4)) }},
	{api.EventGPUFault, "GPU fault", func(x, y float64) string { return fmt.Sprintf("M%s %sh7v7h-7z", f1(x-3.5), f1(y-3.5)) }},
	{api.EventReload, "reload", func(x, y float64) string {
		return fmt.Sprintf("M%s %sa2.5 2.5 0 1 0 5 0a2.5 2.5 0 1 0-5 0", f1(x-2.5), f1(y))
	}},
	{api.EventGiveUp, "give-up", func(x, y float64) string { return fmt.Sprintf("M%s %sh2v9h-2z", f1(x-1), f1(y-4.5)) }},
}

// marks draws every event of a marked kind in the period, in journal
// order, each with a title saying what and when.
func marks(ax axis, evs []api.Event, since time.Time) []mark {
	var out []mark
	for _, ev := range evs {
		if ev.Time.Before(since) || ev.Time.Before(ax.from) || ev.Time.After(ax.to) {
			continue
		}
		i := slices.IndexFunc(markKinds, func(k markKind) bool { return k.event == ev.Event })
		if i < 0 {
			continue
		}
		class := "m m-" + ev.Event
		if ev.Reason != "" && (ev.Event == api.EventStepDown || ev.Event == api.EventRestart) {
			class += " r-" + ev.Reason
		}
		out = append(out, mark{Class: class, D: markKinds[i].shape(ax.x(ev.Time), rowY(i)),
			Title: describe(ev, ax.loc)})
	}
	return out
}
