package policy

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Day is the unit "d" that policy durations accept beside Go's: journal
// retention is naturally said in days ("180d"), and Go's largest unit is h.
const Day = 24 * time.Hour

// ParseDuration parses a Go duration ("200ms", "1h30m") that may also use
// the unit d for days, alone or leading ("180d", "1.5d", "1d12h"). Go's
// syntax has no d, so a d is always the day unit.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	days, rest, found := strings.Cut(s, "d")
	if !found {
		return time.ParseDuration(s)
	}
	neg := strings.HasPrefix(days, "-")
	days = strings.TrimPrefix(strings.TrimPrefix(days, "-"), "+")
	n, err := strconv.ParseFloat(days, 64)
	if err != nil || days == "" || strings.ContainsAny(days, "eE_xXpPnN") || n < 0 {
		return 0, fmt.Errorf("invalid duration %q", s)
	}
	if n*float64(Day) > math.MaxInt64 {
		return 0, fmt.Errorf("invalid duration %q: too long", s)
	}
	d := time.Duration(n * float64(Day))
	if rest != "" {
		if strings.HasPrefix(rest, "-") || strings.HasPrefix(rest, "+") {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		r, err := time.ParseDuration(rest)
		if err != nil {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		if d > math.MaxInt64-r {
			return 0, fmt.Errorf("invalid duration %q: too long", s)
		}
		d += r
	}
	if neg {
		d = -d
	}
	return d, nil
}
