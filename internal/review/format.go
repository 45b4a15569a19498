package review

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// f1 formats a coordinate with at most one decimal: a tenth of a unit is
// finer than a screen or a printer shows, and a week's marks stay small.
func f1(x float64) string {
	s := strings.TrimSuffix(strconv.FormatFloat(x, 'f', 1, 64), ".0")
	if s == "-0" {
		return "0"
	}
	return s
}

// fmtTime is a time as the page shows it: to the second, with its zone.
func fmtTime(t time.Time, loc *time.Location) string {
	return t.In(loc).Format("2006-01-02 15:04:05 MST")
}

// fmtDuration rounds to what a person reads: "3d 4h", "2h 5m", "42s".
func fmtDuration(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d >= 24*time.Hour:
		return fmt.Sprintf("%dd %dh", d/(24*time.Hour), d%(24*time.Hour)/time.Hour)
	case d >= time.Hour:
		return fmt.Sprintf("%dh %dm", d/time.Hour, d%time.Hour/time.Minute)
	case d >= time.Minute:
		return fmt.Sprintf("%dm %ds", d/time.Minute, d%time.Minute/time.Second)
	}
	return fmt.Sprintf("%ds", d/time.Second)
}

// pct is a rate as a percentage with one decimal.
func pct(r float64) string { return fmt.Sprintf("%.1f%%", 100*r) }
