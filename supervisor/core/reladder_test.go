package core

import (
	"testing"

	"github.com/gpuguard/gpuguard/policy"
)

// TestReladder: each level follows its profile's name into the new
// ladder, a gone profile keeps its position (the last at most), and what
// the loop does next, one row each.
func TestReladder(t *testing.T) {
	ladder := func(names ...string) *policy.Policy {
		p := &policy.Policy{}
		for _, n := range names {
			p.Profiles = append(p.Profiles, policy.Profile{Name: n})
		}
		return p
	}
	old := ladder("fp16", "int8", "int4")
	asleep := ladder("fp16", "int8", "nap")
	asleep.Profiles[2].NotServing = true
	for _, tc := range []struct {
		name                   string
		old, pol               *policy.Policy
		level, target, plan    int
		stoppedAsleep, running bool
		want                   Releveled
	}{
		{"same ladder: nothing", old, old, 1, 1, -1, false, true, Releveled{Level: 1, Target: 1, PlanLevel: -1, From: "int8"}},
		{"a profile added above: the same profile one lower, rewritten", old, ladder("bf16", "fp16", "int8", "int4"), 1, 1, -1, false, true,
			Releveled{Level: 2, Target: 2, PlanLevel: -1, From: "int8", Then: RelevelRewrite}},
		{"the running profile gone: a restart at its position", old, ladder("fp16", "int4"), 1, 1, -1, false, true,
			Releveled{Level: 1, Target: 1, PlanLevel: -1, From: "int8", Then: RelevelRestart}},
		{"gone at the end: the last level", old, ladder("fp16"), 2, 2, -1, false, true,
			Releveled{Level: 0, Target: 0, PlanLevel: -1, From: "int4", Then: RelevelRestart}},
		{"a child on its way out: levels follow, nothing else", old, ladder("fp16", "int4"), 1, 2, 2, false, false,
			Releveled{Level: 1, Target: 1, PlanLevel: 1, From: "int8"}},
		{"asleep, its profile now serves: wake", asleep, old, 2, 2, -1, true, false,
			Releveled{Level: 2, Target: 2, PlanLevel: -1, From: "nap", Then: RelevelWake}},
		{"asleep, still not serving: nothing", asleep, asleep, 2, 2, -1, true, false,
			Releveled{Level: 2, Target: 2, PlanLevel: -1, From: "nap"}},
	} {
		if got := Reladder(tc.old, tc.pol, tc.level, tc.target, tc.plan, tc.stoppedAsleep, tc.running); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
