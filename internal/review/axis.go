package review

import (
	"math"
	"time"
)

// The timeline's geometry, in SVG user units (the picture scales to the
// page's width). Lanes from the top: the marks (one row per kind), the
// profile level, the watermark, the time axis.
const (
	width    = 1000.0
	plotLeft = 112.0 // room for the lanes' labels
	plotEnd  = 988.0
	columns  = int(plotEnd - plotLeft) // watermark columns, one per unit
	rowStep  = 11.0
	marksTop = 10.0
)

// axis maps times to x.
type axis struct {
	from, to time.Time
	loc      *time.Location
}

func newAxis(from, to time.Time, loc *time.Location) axis {
	return axis{from: from, to: to, loc: loc}
}

// frac is where t falls in the period, 0..1 (clamped).
func (a axis) frac(t time.Time) float64 {
	f := float64(t.Sub(a.from)) / float64(a.to.Sub(a.from))
	return math.Max(0, math.Min(1, f))
}

func (a axis) x(t time.Time) float64 { return plotLeft + a.frac(t)*(plotEnd-plotLeft) }

// column is the watermark column t falls in.
func (a axis) column(t time.Time) int {
	return min(columns-1, int(a.frac(t)*float64(columns)))
}

// tick is a labelled time on the axis.
type tick struct {
	X     float64
	Label string
}

// tickSteps are the spacings a tick may have, finest first.
var tickSteps = []time.Duration{time.Minute, 5 * time.Minute, 10 * time.Minute, 30 * time.Minute,
	time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour, 48 * time.Hour, 7 * 24 * time.Hour}

// ticks are at most 8 round times within the period: local midnights for
// a period of days, round hours or minutes for shorter ones.
func (a axis) ticks() []tick {
	span := a.to.Sub(a.from)
	step := tickSteps[len(tickSteps)-1]
	for _, s := range tickSteps {
		if span/s <= 8 {
			step = s
			break
		}
	}
	layout := "15:04"
	if span > 24*time.Hour {
		layout = "Mon 15:04"
	}
	if step >= 24*time.Hour {
		layout = "Mon 2 Jan"
	}
	var out []tick
	for t := a.first(step); !t.After(a.to); t = a.next(t, step) {
		out = append(out, tick{X: a.x(t), Label: t.In(a.loc).Format(layout)})
	}
	return out
}

// first is the first round time at or after the period's start.
func (a axis) first(step time.Duration) time.Time {
	if step < 24*time.Hour {
		t := a.from.Truncate(step)
		if t.Before(a.from) {
			t = t.Add(step)
		}
		return t
	}
	l := a.from.In(a.loc)
	t := time.Date(l.Year(), l.Month(), l.Day(), 0, 0, 0, 0, a.loc)
	if t.Before(a.from) {
		t = t.AddDate(0, 0, 1)
	}
	return t
}

// next steps by calendar days for day steps (a day with a DST change is
// not 24 h), by the duration otherwise.
func (a axis) next(t time.Time, step time.Duration) time.Time {
	if step >= 24*time.Hour {
		return t.AddDate(0, 0, int(step/(24*time.Hour)))
	}
	return t.Add(step)
}
