package policy

import (
	"strings"
	"testing"
)

func TestNeverFits(t *testing.T) {
	const gib = 1 << 30
	ladder := func(scope string, quota uint64, needs ...uint64) *Policy {
		p := &Policy{Watch: Watch{Scope: scope, Quota: quota}, Watermark: Watermark{High: 0.9}}
		for i, n := range needs {
			p.Profiles = append(p.Profiles, Profile{Name: string(rune('a' + i)), Needs: n})
		}
		return p
	}
	gpus := func(totals ...uint64) []GPUTotal {
		var out []GPUTotal
		for i, t := range totals {
			out = append(out, GPUTotal{Index: i, Total: t})
		}
		return out
	}
	for _, tc := range []struct {
		name string
		pol  *Policy
		gpus []GPUTotal
		want string // "" = can fit
	}{
		{"fits", ladder(ScopeDevice, 0, 40*gib, 8*gib), gpus(16 * gib), ""},
		{"the smallest is over the total", ladder(ScopeDevice, 0, 72*gib, 36*gib), gpus(16 * gib), "b, needs 36 GiB, more than GPU 0 holds (16 GiB in all)"},
		{"exactly the total can fit (with nothing else)", ladder(ScopeDevice, 0, 16*gib), gpus(16 * gib), ""},
		{"a profile without needs always fits", ladder(ScopeDevice, 0, 72*gib, 0), gpus(16 * gib), ""},
		{"every GPU must hold it", ladder(ScopeDevice, 0, 20*gib), gpus(80*gib, 16*gib), "more than GPU 1 holds (16 GiB in all)"},
		{"the quota caps the total", ladder(ScopeDevice, 8*gib, 10*gib), gpus(16 * gib), "more than the [watch] quota of 8 GiB"},
		{"a quota over the total is capped on device scope", ladder(ScopeDevice, 32*gib, 20*gib), gpus(16 * gib), "more than GPU 0 holds (16 GiB in all)"},
		{"process scope: the quota", ladder(ScopeProcess, 4*gib, 5*gib), gpus(16 * gib), "more than the [watch] quota of 4 GiB"},
		{"no GPU known: the quota alone", ladder(ScopeDevice, 4*gib, 5*gib), nil, "more than the [watch] quota of 4 GiB"},
		{"no GPU known, no quota", ladder(ScopeDevice, 0, 500*gib), nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.pol.NeverFits(tc.gpus)
			if (got == "") != (tc.want == "") || !strings.Contains(got, tc.want) {
				t.Errorf("NeverFits = %q, want %q", got, tc.want)
			}
		})
	}
}
