package core

import (
	"fmt"
	"strings"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/policy"
)

// The start rules: when a waiting start goes ahead and in which profile,
// what it waits for first (a ladder that can never fit ends the run; a
// gpu_fault restart waits for the GPU, a restart for the dead child's
// memory, a start on a shared GPU for its turn: claim.go), and when_full
// once no profile fits.

// Start is a sample while a start waits (the state is waiting).
type Start struct {
	Now     time.Time
	Target  int      // the level the start aims for
	Devices []Device // the watched GPUs; nil when Err
	Err     error    // the probe call failed: there is no reading
	// Release: the start waits for the dead child's processes to free
	// their GPU memory; Alive: some still hold it in this reading;
	// Waited: how long the wait has lasted.
	Release, Alive bool
	Waited         time.Duration
	// Faulted: a watched GPU is still faulted (an Xid not followed by a
	// reading of it).
	Faulted bool
	Claim   Claim
	// First: no child has been launched in this run yet (not a restart,
	// not a wake): it makes room only when no profile fits.
	First bool
	// Why is why the start happens (Relaunch's, Requested's or a wake's
	// reason): its launch, fit and wait name it.
	Why Reason
}

// Launched is a new child, launched at Now: the rules start afresh, and
// a start claimed on a shared GPU lasts until its memory settles, from
// Used (the devices' used memory, or 0 when the backend lists the child's
// own processes).
type Launched struct {
	Now  time.Time
	Used uint64
}

func (Start) input()    {}
func (Launched) input() {}

// start decides a waiting start on a sample: the end of the run when the
// ladder can never fit, the waits, then the profile (the first from the
// target down that fits) or what when_full says (wait, the lowest, or
// exit). Without a reading there is no fit to judge and the monitoring
// does not hold the service hostage: the start goes where it aimed once
// any release wait is over.
func (st State) start(g Given, in Start) (State, []Effect) {
	pol, rw := g.Policy, g.Policy.Restart
	if in.Err == nil {
		if why := NeverFits(pol, in.Devices); why != "" {
			return st, []Effect{
				NoteFit{JudgeFit(pol, in.Target, in.Devices), "no profile can ever fit", in.Why},
				Finish{State: api.StateFatal, End: EndNoFit, Err: fmt.Errorf("%w, ever: %s", ErrNoFit, why)},
			}
		}
	}
	if st.faultWait {
		// A gpu_fault restart: without a GPU that answers there is
		// nothing to start on.
		if in.Err != nil || in.Faulted {
			if st.faultNoted {
				return st, nil
			}
			st.faultNoted = true
			return st, []Effect{Log{"waiting for the faulted GPU to answer again before restarting"}}
		}
		st.faultWait = false
	}
	if in.Err != nil {
		if in.Release && in.Waited < rw.ReleaseTimeout {
			return st, nil
		}
		effs, ok := st.claim.gate(in.Claim, true, pol.Watch.Settle)
		if !ok {
			return st, effs
		}
		name := pol.Profiles[in.Target].Name
		return st, append(effs, Launch{in.Target, Fit{}, fmt.Sprintf("starting in %s unchecked: no GPU reading (%v)", name, in.Err), in.Why})
	}
	var effs []Effect
	if in.Release {
		if in.Alive && in.Waited < rw.ReleaseTimeout {
			return st, nil
		}
		if in.Alive {
			effs = append(effs, Log{fmt.Sprintf("the last child's GPU memory was not freed within %s; starting anyway", rw.ReleaseTimeout)})
		}
		effs = append(effs, Released{})
	}
	// A start that does not fit asks its GPU's idle peers for room first,
	// and waits while they make it (room.go); the claim comes after.
	reffs, hold := st.room.want(g, startNeed(g, in))
	effs = append(effs, reffs...)
	if hold {
		return st, append(effs, st.claim.endGranted()...)
	}
	// With when_full = "wait" nothing is claimed while no profile fits:
	// the start waits for memory, and claims once something fits.
	_, fits := PickProfile(pol, in.Target, in.Devices)
	geffs, ok := st.claim.gate(in.Claim, rw.WhenFull != policy.WhenFullWait || fits, pol.Watch.Settle)
	effs = append(effs, geffs...)
	if !ok {
		return st, effs
	}
	st, more := st.pick(g, in)
	return st, append(effs, more...)
}

// pick picks the profile of a start: the first from the target down that
// fits, else what when_full says (wait, the lowest, or exit).
func (st State) pick(g Given, in Start) (State, []Effect) {
	pol := g.Policy
	j := JudgeFit(pol, in.Target, in.Devices)
	if j.OK {
		return st, []Effect{Launch{j.Level, j, "starting in " + pol.Profiles[j.Level].Name, in.Why}}
	}
	free := FreeText(pol, in.Devices)
	switch pol.Restart.WhenFull {
	case policy.WhenFullLowest:
		return st, []Effect{Launch{lastServing(pol.Profiles), j, "no profile fits; starting in the last profile (when_full = \"lowest\")", in.Why}}
	case policy.WhenFullExit:
		return st, []Effect{
			NoteFit{j, "no profile fits; exiting (when_full = \"exit\")", in.Why},
			Finish{State: api.StateFatal, End: EndNoFit, Err: fmt.Errorf("%w the free GPU memory (when_full = \"exit\"): %s", ErrNoFit, free)},
		}
	}
	end := st.claim.end("")
	return st, append(end, Wait{j, free, in.Why})
}

// launched starts the rules afresh for a new child, and follows its start
// on a shared GPU until it settles.
func (st State) launched(g Given, in Launched) (State, []Effect) {
	st.rules.Reset()
	st.undo, st.measure = nil, nil
	st.starts.ready = false
	st.room.launched()
	effs := st.claim.began(in.Now, in.Used, g.Policy.Watch.Settle)
	return st, effs
}

// PickProfile returns the first profile from level from on down the
// ladder (from, from+1, ...) whose needs fit on every watched GPU, and
// false when none does. It never returns a profile above from: a start
// aims at from, and only the memory decides how far below it goes; nor a
// serving = false one: a child is never started to serve in a profile
// that serves nothing (a wake that does not fit waits instead).
func PickProfile(pol *policy.Policy, from int, devs []Device) (int, bool) {
next:
	for i := from; i < len(pol.Profiles) && pol.Profiles[i].Serving(); i++ {
		for _, d := range devs {
			if !pol.Fits(i, d.Used, d.Total) {
				continue next
			}
		}
		return i, true
	}
	return 0, false
}

// FreeText is the devices' usage against their limits, for people.
func FreeText(pol *policy.Policy, devs []Device) string {
	var parts []string
	for _, d := range devs {
		parts = append(parts, fmt.Sprintf("GPU %d: %s used of %s", d.Index,
			policy.FormatSize(d.Used), policy.FormatSize(pol.Limit(d.Total))))
	}
	return strings.Join(parts, ", ")
}

// startNeed is what a start needs of its GPUs, to make room for: a
// restart or a wake (not First) the profile it aims at; a first start,
// only when no profile from the target down fits, the one of them that
// needs least.
func startNeed(g Given, in Start) roomNeed {
	pol := g.Policy
	n := roomNeed{now: in.Now, devices: in.Devices, allowed: in.Claim.Peers && pol.Serve.MakeRoom && !g.Observe}
	level := in.Target
	if in.First {
		if _, ok := PickProfile(pol, in.Target, in.Devices); ok {
			return n
		}
		for i := in.Target; i < len(pol.Profiles) && pol.Profiles[i].Serving(); i++ {
			if pol.Profiles[i].Needs < pol.Profiles[level].Needs {
				level = i
			}
		}
	}
	if pol.Profiles[level].Serving() {
		n.bytes = pol.Profiles[level].Needs
	}
	return n
}

// lastServing is the last serving profile of ps (the ladder's last when
// none is serving = false).
func lastServing(ps []policy.Profile) int {
	if i := FirstAsleep(ps); i > 0 {
		return i - 1
	}
	return len(ps) - 1
}
