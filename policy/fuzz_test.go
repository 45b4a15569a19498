package policy

import (
	"errors"
	"testing"
)

// FuzzParse feeds arbitrary text to Parse: it must never panic, and it
// must either return a usable policy or an ErrorList of *Error.
func FuzzParse(f *testing.F) {
	f.Add([]byte(full))
	f.Add([]byte("[[profile]]\nname = \"a\"\nenv = { A = \"${B}\" }\n"))
	f.Add([]byte("command = [\"x\", \"${A\"]\n[watermark]\nhigh = 2\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse(data, "fuzz.toml")
		if err != nil {
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("error %v (%T) is not a non-empty ErrorList", err, err)
			}
			for _, e := range list {
				if e == nil || e.File != "fuzz.toml" || e.Msg == "" || e.Line < 0 {
					t.Fatalf("malformed problem %#v", e)
				}
			}
			_ = err.Error()
			return
		}
		if p == nil || len(p.Profiles) == 0 || len(p.Profiles) > MaxProfiles {
			t.Fatalf("valid policy with %v", p)
		}
		w := p.Watermark
		if !(0 < w.Low && w.Low < w.High && w.High < w.Critical && w.Critical <= 1) {
			t.Fatalf("watermarks out of order: %+v", w)
		}
		if p.Watch.Interval <= 0 || p.Restart.Backoff > p.Restart.BackoffMax {
			t.Fatalf("bad timers: %+v %+v", p.Watch, p.Restart)
		}
		seen := map[string]bool{}
		for _, prof := range p.Profiles {
			if prof.Name == "" || seen[prof.Name] || prof.Env == nil {
				t.Fatalf("bad profile %+v", prof)
			}
			seen[prof.Name] = true
		}
		if p.Command != nil {
			if err := p.CheckArgs(p.Command); err != nil {
				t.Fatalf("valid policy whose command does not expand: %v", err)
			}
		}
	})
}
