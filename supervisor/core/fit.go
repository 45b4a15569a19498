package core

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/policy"
)

// A start that lands below the profile it aimed for must say why: a
// newcomer who sees `started ... in profile int8b` cannot tell that fp16
// was skipped because it needs 40 GiB and 12 GiB were free. The fit
// judgement is made once, here, and told three ways from the same value:
// the stderr line, the journal's `fit` event and status's `fit`.

// Fit is how one start (or one wait) chose its profile.
type Fit struct {
	Tried   []api.FitTry
	Level   int  // the first that fits when OK; the one started in when Started
	OK      bool // some profile from the target down fits
	Started bool // a child is started in Level
	Worst   Device
	Limit   uint64 // the worst GPU's quota, else total
	Room    uint64 // what fits under high on it: floor(limit x high) - used
	Known   bool   // there was a device to judge against
}

// JudgeFit tries the profiles from level from down on devs, the way
// PickProfile picks, and records each try against the worst watched GPU
// (the one with the least room under high).
func JudgeFit(pol *policy.Policy, from int, devs []Device) Fit {
	j := Fit{}
	for i, d := range devs {
		limit := pol.Limit(d.Total)
		room := pol.Room(d.Used, d.Total)
		if i == 0 || room < j.Room {
			j.Worst, j.Limit, j.Room, j.Known = d, limit, room, true
		}
	}
	j.Level, j.OK = PickProfile(pol, from, devs)
	for i := from; i < len(pol.Profiles); i++ {
		fits := j.OK && i == j.Level
		j.Tried = append(j.Tried, api.FitTry{Profile: pol.Profiles[i].Name, Level: i, NeedsBytes: pol.Profiles[i].Needs, Fits: fits})
		if fits {
			break
		}
	}
	return j
}

// Free is the worst GPU's limit less its usage (0 when over).
func (j Fit) Free() uint64 {
	if j.Worst.Used >= j.Limit {
		return 0
	}
	return j.Limit - j.Worst.Used
}

// Text says what was tried and against what, for people:
// "fp16 needs 40 GiB, does not fit; int8b needs 8 GiB, fits (GPU 0: 12 GiB free of 16 GiB, 10.4 GiB under high 0.90)".
func (j Fit) Text(pol *policy.Policy) string {
	parts := make([]string, 0, len(j.Tried))
	for _, t := range j.Tried {
		verdict := "does not fit"
		if t.Fits {
			verdict = "fits"
		}
		if t.NeedsBytes == 0 {
			parts = append(parts, t.Profile+" has no needs estimate")
			continue
		}
		parts = append(parts, fmt.Sprintf("%s needs %s, %s", t.Profile, policy.FormatSize(t.NeedsBytes), verdict))
	}
	s := strings.Join(parts, "; ")
	if j.Known {
		s += fmt.Sprintf(" (GPU %d: %s free of %s, %s under high %.2f)", j.Worst.Index,
			policy.FormatSize(j.Free()), policy.FormatSize(j.Limit), policy.FormatSize(j.Room), pol.Watermark.High)
	}
	return s
}

// Event is the journal's record of j; outcome says what came of it
// (starting in X, waiting, ...).
func (j Fit) Event(pol *policy.Policy, reason, outcome string) api.Event {
	ev := api.Event{Event: api.EventFit, Reason: reason, Tried: j.Tried, Detail: outcome}
	if t := j.Text(pol); t != "" {
		ev.Detail += ": " + t
	}
	if j.OK || j.Started {
		ev.Profile, ev.Level, ev.To = pol.Profiles[j.Level].Name, j.Level, pol.Profiles[j.Level].Name
	}
	if j.Known {
		ev.FreeBytes, ev.LimitBytes = new(j.Free()), j.Limit
		ev.GPU, ev.GPUIndex = j.Worst.UUID, new(j.Worst.Index)
	}
	return ev
}

// NeverFits is the policy's NeverFits on the watched GPUs: why no profile
// can fit them even when empty, "" when some can (or none is watched).
func NeverFits(pol *policy.Policy, devs []Device) string {
	if len(devs) == 0 {
		return ""
	}
	gpus := make([]policy.GPUTotal, len(devs))
	for i, d := range devs {
		gpus[i] = policy.GPUTotal{Index: d.Index, Total: d.Total}
	}
	return pol.NeverFits(gpus)
}

// StepFit judges whether profile to fits now for a manual step from
// level: on every watched GPU, the usage without the child's own (its
// processes, tree, where the backend lists them, else the current
// profile's needs estimate) plus to's needs must fit under high. "" when
// it fits or cannot be judged (no reading, no needs estimate).
func StepFit(pol *policy.Policy, level, to int, r *Reading, tree map[int]bool) string {
	p := pol.Profiles[to]
	if p.Needs == 0 || r == nil {
		return ""
	}
	own := ownUse(pol, level, r, tree)
	for _, d := range r.Devices {
		used := d.Used - min(d.Used, own[d.Index])
		if pol.Fits(to, used, d.Total) {
			continue
		}
		limit := pol.Limit(d.Total)
		return fmt.Sprintf("profile %s does not fit: it needs %s, and GPU %d has %s free under high %.2f (%s of %s used without this child)",
			p.Name, policy.FormatSize(p.Needs), d.Index, policy.FormatSize(pol.Room(used, d.Total)),
			pol.Watermark.High, policy.FormatSize(used), policy.FormatSize(limit))
	}
	return ""
}

// WakeFit is StepFit for a wake out of a serving = false profile. A
// serving profile without `needs` is taken to need served, what the
// server's processes used the last time it served: without it, a wake on
// request into a GPU still as full as when the server went to sleep would
// always "fit", and the server would wake into the pressure that put it to
// sleep, and be put back to sleep, over and over. served = 0 (not known:
// the backend lists no processes) is judged as StepFit does.
func WakeFit(pol *policy.Policy, level, to int, r *Reading, tree map[int]bool, served uint64) string {
	needs := wakeNeeds(pol.Profiles[to], served)
	if needs == pol.Profiles[to].Needs {
		return StepFit(pol, level, to, r, tree)
	}
	p := *pol
	p.Profiles = slices.Clone(pol.Profiles)
	p.Profiles[to].Needs = needs
	return StepFit(&p, level, to, r, tree)
}

// wakeNeeds is what a wake into profile p needs: its needs, else served
// (WakeFit).
func wakeNeeds(p policy.Profile, served uint64) uint64 {
	if p.Needs > 0 {
		return p.Needs
	}
	return served
}

// ownUse is the instance's own usage of each device in r: its processes
// (tree) where the backend lists them, else its profile level's needs
// estimate on each: what StepFit and a wake's need of room take out
// of the usage.
func ownUse(pol *policy.Policy, level int, r *Reading, tree map[int]bool) map[int]uint64 {
	own := map[int]uint64{}
	if r.ProcessesAt.IsZero() {
		for _, d := range r.Devices {
			own[d.Index] = pol.Profiles[level].Needs
		}
		return own
	}
	for _, p := range r.Processes {
		if tree[p.PID] {
			own[p.Device] += p.Used
		}
	}
	return own
}
