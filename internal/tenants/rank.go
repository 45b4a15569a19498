package tenants

import (
	"cmp"
	"slices"

	"github.com/gpuguard/gpuguard/api"
)

// Candidate is a tenant that answered, and where to reach it.
type Candidate struct {
	api.TenantInfo
	Socket string
}

// IsDown reports whether kind gives memory back (down, predicted, critical).
func IsDown(kind string) bool { return api.IsDown(kind) }

// Rank returns the tenants of gpu that can carry out a decision of kind,
// best first. For a step down (or a critical restart): those not at their
// last profile, lowest priority first, ties to the one using the most
// memory on gpu, then to the name first in byte order. For a step up:
// those below their first profile, highest priority first, then by name.
// Only device-scope tenants that are not observing and have a child running
// take part: a process-scope tenant steps by its own quota.
func Rank(kind, gpu string, cands []Candidate) []Candidate {
	up := kind == api.KindUp
	var out []Candidate
	for _, c := range cands {
		if eligible(c.TenantInfo, gpu, up) {
			out = append(out, c)
		}
	}
	if up {
		slices.SortStableFunc(out, orderedBy(higherPriority, byName))
	} else {
		slices.SortStableFunc(out, orderedBy(lowerPriority, moreMemory(gpu), byName))
	}
	return out
}

// eligible says whether t can take a step of that direction on gpu.
func eligible(t api.TenantInfo, gpu string, up bool) bool {
	if !t.Watches(gpu) || t.Observe || t.Scope != "device" {
		return false
	}
	if !canStep(t.State) {
		return false
	}
	if up {
		return t.Level > 0
	}
	return t.Level < t.Levels-1
}

// canStep says whether an instance in state (the status object's) can take
// a step: only one whose child runs. It is all the others read of a
// tenant's state.
func canStep(state string) bool {
	return state == api.StateRunning || state == api.StateStarting
}

// less is one comparator of the chain: negative when a ranks before b.
type less func(a, b Candidate) int

// orderedBy chains comparators: the first that tells a and b apart decides
// (kubelet's eviction ranking is built the same way).
func orderedBy(cmps ...less) func(a, b Candidate) int {
	return func(a, b Candidate) int {
		for _, c := range cmps {
			if r := c(a, b); r != 0 {
				return r
			}
		}
		return 0
	}
}

func lowerPriority(a, b Candidate) int  { return cmp.Compare(a.Priority, b.Priority) }
func higherPriority(a, b Candidate) int { return cmp.Compare(b.Priority, a.Priority) }
func byName(a, b Candidate) int         { return cmp.Compare(a.Name, b.Name) }

func moreMemory(gpu string) less {
	return func(a, b Candidate) int {
		ua, _ := a.Used(gpu)
		ub, _ := b.Used(gpu)
		return cmp.Compare(ub, ua)
	}
}
