package tenants

import (
	"slices"
	"testing"

	"github.com/gpuguard/gpuguard/api"
)

const gpuA, gpuB = "GPU-a", "GPU-b"

// tenant is a running device-scope tenant of gpuA at level 0 of 3 using
// used bytes of it; mods adjust it.
func tenant(name string, prio int, used uint64, mods ...func(*api.TenantInfo)) Candidate {
	t := api.TenantInfo{Name: name, Priority: prio, Scope: "device", State: api.StateRunning,
		Levels: 3, GPUs: []api.TenantGPU{{UUID: gpuA, UsedBytes: used}}}
	for _, m := range mods {
		m(&t)
	}
	return Candidate{TenantInfo: t, Socket: "/run/" + name + ".sock"}
}

func atLevel(l int) func(*api.TenantInfo) { return func(t *api.TenantInfo) { t.Level = l } }
func inState(s string) func(*api.TenantInfo) {
	return func(t *api.TenantInfo) { t.State = s }
}

func TestRank(t *testing.T) {
	observing := func(t *api.TenantInfo) { t.Observe = true }
	processScope := func(t *api.TenantInfo) { t.Scope = "process" }
	otherGPU := func(t *api.TenantInfo) { t.GPUs = []api.TenantGPU{{UUID: gpuB, UsedBytes: 1}} }
	bothGPUs := func(t *api.TenantInfo) {
		t.GPUs = []api.TenantGPU{{UUID: gpuB, UsedBytes: 100}, {UUID: gpuA, UsedBytes: 1}}
	}
	for _, tc := range []struct {
		name  string
		kind  string
		cands []Candidate
		want  []string
	}{
		{"down: lowest priority first", api.KindDown,
			[]Candidate{tenant("llm", 10, 9), tenant("batch", -5, 1), tenant("embed", 0, 5)},
			[]string{"batch", "embed", "llm"}},
		{"down: a tie goes to the most memory on that GPU", api.KindDown,
			[]Candidate{tenant("a", 0, 1), tenant("b", 0, 7), tenant("c", 0, 3)},
			[]string{"b", "c", "a"}},
		{"down: memory on another GPU does not count", api.KindDown,
			[]Candidate{tenant("a", 0, 5), tenant("b", 0, 0, bothGPUs)},
			[]string{"a", "b"}},
		{"down: then the name first in byte order", api.KindDown,
			[]Candidate{tenant("b", 0, 5), tenant("B", 0, 5), tenant("a", 0, 5)},
			[]string{"B", "a", "b"}},
		{"down: the last profile cannot step", api.KindDown,
			[]Candidate{tenant("low", -10, 1, atLevel(2)), tenant("mid", 0, 1, atLevel(1)), tenant("high", 10, 1)},
			[]string{"mid", "high"}},
		{"critical and predicted rank as down", api.KindCritical,
			[]Candidate{tenant("high", 10, 1), tenant("low", -10, 1, atLevel(2)), tenant("mid", 0, 1)},
			[]string{"mid", "high"}},
		{"predicted", api.KindPredicted,
			[]Candidate{tenant("high", 10, 1), tenant("mid", 0, 1)},
			[]string{"mid", "high"}},
		{"observe, process scope, another GPU and no child take no part", api.KindDown,
			[]Candidate{tenant("obs", -9, 1, observing), tenant("proc", -8, 1, processScope),
				tenant("else", -7, 1, otherGPU), tenant("waiting", -6, 1, inState(api.StateWaiting)),
				tenant("restarting", -5, 1, inState(api.StateStepping)), tenant("ok", 0, 1),
				tenant("new", 1, 1, inState(api.StateStarting))},
			[]string{"ok", "new"}},
		{"up: highest priority first, below the first profile only", api.KindUp,
			[]Candidate{tenant("low", -10, 9, atLevel(2)), tenant("top", 10, 1), tenant("high", 5, 1, atLevel(1)),
				tenant("mid", 0, 1, atLevel(1))},
			[]string{"high", "mid", "low"}},
		{"up: ties by name, memory does not matter", api.KindUp,
			[]Candidate{tenant("b", 0, 9, atLevel(1)), tenant("a", 0, 1, atLevel(1))},
			[]string{"a", "b"}},
		{"nobody can step", api.KindDown,
			[]Candidate{tenant("a", 0, 1, atLevel(2))}, nil},
		{"no candidates", api.KindUp, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, c := range Rank(tc.kind, gpuA, tc.cands) {
				got = append(got, c.Name)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Rank = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestKinds(t *testing.T) {
	for kind, down := range map[string]bool{api.KindDown: true, api.KindPredicted: true, api.KindCritical: true, api.KindUp: false} {
		if IsDown(kind) != down {
			t.Errorf("%s: IsDown %v", kind, IsDown(kind))
		}
	}
	if IsDown("sideways") || IsDown("") {
		t.Error("unknown kinds must not be down")
	}
}
