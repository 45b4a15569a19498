package policy

import (
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{in: "200ms", want: 200 * time.Millisecond},
		{in: "1h30m", want: 90 * time.Minute},
		{in: "180d", want: 180 * Day},
		{in: " 7d ", want: 7 * Day},
		{in: "1.5d", want: 36 * time.Hour},
		{in: "1d12h", want: 36 * time.Hour},
		{in: "1d30m15s", want: Day + 30*time.Minute + 15*time.Second},
		{in: "0d", want: 0},
		{in: "-1d", want: -Day},
		{in: "d", bad: true},
		{in: "1dd", bad: true},
		{in: "1d-1h", bad: true},
		{in: "1e3d", bad: true},
		{in: "0x10d", bad: true},
		{in: "NaNd", bad: true},
		{in: "infd", bad: true},
		{in: "999999999d", bad: true},
		{in: "1d 2h", bad: true},
		{in: "10", bad: true},
		{in: "", bad: true},
	} {
		got, err := ParseDuration(c.in)
		if c.bad {
			if err == nil {
				t.Errorf("ParseDuration(%q) = %v, want an error", c.in, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}
