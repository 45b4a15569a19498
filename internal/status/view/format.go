package view

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// UsedOfTotal renders "30.0/40.0 GiB": both in the unit of the total, so
// the two numbers compare at a glance.
func UsedOfTotal(used, total uint64) string {
	unit, div := unitFor(total)
	return fmt.Sprintf("%.1f/%.1f %s", float64(used)/div, float64(total)/div, unit)
}

func bytesText(n uint64) string {
	unit, div := unitFor(n)
	if unit == "B" {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.1f %s", float64(n)/div, unit)
}

func unitFor(n uint64) (string, float64) {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	i := 0
	for i < len(units)-1 && n >= 1<<(10*(i+1)) {
		i++
	}
	return units[i], math.Pow(1024, float64(i))
}

// Duration renders an uptime compactly: 42s, 5m03s, 1h02m, 3d04h.
func Duration(seconds float64) string {
	if seconds < 0 || math.IsNaN(seconds) {
		return "-"
	}
	s := int64(seconds)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	case s < 86400:
		return fmt.Sprintf("%dh%02dm", s/3600, s%3600/60)
	}
	return fmt.Sprintf("%dd%02dh", s/86400, s%86400/3600)
}

// Period renders a polling period: 200ms, 1s, 20ms; "-" when unknown.
func Period(seconds float64) string {
	if seconds <= 0 || math.IsNaN(seconds) {
		return "-"
	}
	return time.Duration(seconds * float64(time.Second)).Round(time.Millisecond).String()
}

// ETA renders the time until critical: 4.2s under ten seconds, then as
// Duration; "-" when the watermark is not rising (nil).
func ETA(seconds *float64) string {
	switch {
	case seconds == nil || math.IsNaN(*seconds):
		return "-"
	case *seconds < 10:
		return fmt.Sprintf("%.1fs", max(*seconds, 0))
	}
	return Duration(*seconds)
}

// LastEvent renders a journal event as "stepdown int8 (watermark) 12s ago".
func LastEvent(ev *api.Event, now time.Time) string {
	if ev == nil {
		return "-"
	}
	parts := []string{ev.Event}
	switch {
	case ev.From != "" && ev.To != "":
		parts = append(parts, ev.From+"→"+ev.To)
	case ev.Profile != "":
		parts = append(parts, ev.Profile)
	}
	if why := firstNonEmpty(ev.Reason, ev.Detail); why != "" {
		parts = append(parts, "("+why+")")
	}
	if !ev.Time.IsZero() && !now.IsZero() {
		parts = append(parts, Duration(max(0, now.Sub(ev.Time).Seconds()))+" ago")
	}
	return strings.Join(parts, " ")
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
