package review

import (
	"fmt"
	"strings"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// column is the watermark records that fall in one unit of the picture's
// width: their lowest min, highest max, mean weighted by samples, and the
// thresholds of the newest.
type column struct {
	min, max, sum float64
	n             int
	high, crit    float64
	has           bool
}

func (c *column) add(m api.Minute) {
	w := max(m.Samples, 1)
	if !c.has {
		c.min, c.max = m.Min, m.Max
	}
	c.has = true
	c.min, c.max = min(c.min, m.Min), max(c.max, m.Max)
	c.sum += m.Mean * float64(w)
	c.n += w
	c.high, c.crit = m.High, m.Critical
}

// drawWatermark folds the period's watermark records into columns and
// draws them: the band from min to max, the mean as a line, and high and
// critical as they were in force (carried to the columns between records,
// and back to the period's start from the first).
func drawWatermark(tl *timeline, ax axis, evs []api.Event) {
	cols := make([]column, columns)
	found := false
	for _, ev := range evs {
		if ev.Event != api.EventWatermark || ev.Minute == nil || ev.Time.Before(ax.from) {
			continue
		}
		start := ev.Time.Add(-time.Nanosecond).Truncate(time.Minute)
		if start.After(ax.to) {
			continue
		}
		for c := ax.column(start); c <= ax.column(ev.Time.Add(-time.Nanosecond)); c++ {
			cols[c].add(*ev.Minute)
		}
		found = true
	}
	if !found {
		tl.NoWatermark = true
		return
	}
	var mean strings.Builder
	for c := 0; c < columns; {
		if !cols[c].has {
			c++
			continue
		}
		end := c
		for end+1 < columns && cols[end+1].has {
			end++
		}
		tl.Band = append(tl.Band, bandPath(tl, cols, c, end))
		mean.Reset()
		steps(&mean, tl, cols, c, end, func(k column) float64 { return k.sum / float64(k.n) })
		tl.Mean = append(tl.Mean, mean.String())
		c = end + 1
	}
	fillThresholds(cols)
	var high, crit strings.Builder
	steps(&high, tl, cols, 0, columns-1, func(k column) float64 { return k.high })
	steps(&crit, tl, cols, 0, columns-1, func(k column) float64 { return k.crit })
	tl.High, tl.Crit = high.String(), crit.String()
	lastCol := cols[columns-1]
	tl.HighLabel = label{Y: tl.wmY(lastCol.high) - 2, Text: fmt.Sprintf("high %.0f%%", 100*lastCol.high)}
	tl.CritLabel = label{Y: tl.wmY(lastCol.crit) - 2, Text: fmt.Sprintf("critical %.0f%%", 100*lastCol.crit)}
	if tl.CritLabel.Y > tl.HighLabel.Y-9 { // close thresholds: critical's label goes above
		tl.CritLabel.Y = tl.HighLabel.Y - 9
	}
}

// bandPath outlines columns c..end: along the max left to right, back
// along the min.
func bandPath(tl *timeline, cols []column, c, end int) string {
	var b strings.Builder
	steps(&b, tl, cols, c, end, func(k column) float64 { return k.max })
	for i := end; i >= c; i-- {
		fmt.Fprintf(&b, "V%sH%s", f1(tl.wmY(cols[i].min)), f1(plotLeft+float64(i)))
	}
	b.WriteString("Z")
	return b.String()
}

// steps draws value over columns c..end as a step line, one unit a column,
// joining runs of equal value into one segment.
func steps(b *strings.Builder, tl *timeline, cols []column, c, end int, value func(column) float64) {
	y := tl.wmY(value(cols[c]))
	fmt.Fprintf(b, "M%s %s", f1(plotLeft+float64(c)), f1(y))
	for i := c + 1; i <= end; i++ {
		if ny := tl.wmY(value(cols[i])); f1(ny) != f1(y) {
			fmt.Fprintf(b, "H%sV%s", f1(plotLeft+float64(i)), f1(ny))
			y = ny
		}
	}
	fmt.Fprintf(b, "H%s", f1(plotLeft+float64(end+1)))
}

// fillThresholds gives every column the thresholds in force: those of the
// latest column with records before it, or of the first after it.
func fillThresholds(cols []column) {
	first := -1
	for i := range cols {
		if cols[i].has {
			first = i
			break
		}
	}
	for i := range cols {
		switch {
		case i < first:
			cols[i].high, cols[i].crit = cols[first].high, cols[first].crit
		case !cols[i].has && i > 0:
			cols[i].high, cols[i].crit = cols[i-1].high, cols[i-1].crit
		}
	}
}
