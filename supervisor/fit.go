package supervisor

import (
	"fmt"
	"strings"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/policy"
)

// A start that lands below the profile it aimed for must say why: a
// newcomer who sees `started ... in profile int8b` cannot tell that fp16
// was skipped because it needs 40 GiB and 12 GiB were free. The fit
// judgement is made once, here, and told three ways from the same value:
// the stderr line, the journal's `fit` event and status's `fit`.

// fitJudgement is how one start (or one wait) chose its profile.
type fitJudgement struct {
	tried   []api.FitTry
	level   int  // the first that fits when ok; the one started in when started
	ok      bool // some profile from the target down fits
	started bool // a child is started in level (launchFit)
	worst   gpu.Device
	limit   uint64 // the worst GPU's quota, else total
	room    uint64 // what fits under high on it: floor(limit x high) - used
	known   bool   // there was a device to judge against
}

// judgeFit tries the profiles from level down on devs, the way pickProfile
// picks, and records each try against the worst watched GPU (the one with
// the least room under high).
func judgeFit(pol *policy.Policy, from int, devs []gpu.Device) fitJudgement {
	j := fitJudgement{}
	for i, d := range devs {
		limit := pol.Limit(d.Total)
		room := pol.Room(d.Used, d.Total)
		if i == 0 || room < j.room {
			j.worst, j.limit, j.room, j.known = d, limit, room, true
		}
	}
	j.level, j.ok = pickProfile(pol, from, devs)
	for i := from; i < len(pol.Profiles); i++ {
		fits := j.ok && i == j.level
		j.tried = append(j.tried, api.FitTry{Profile: pol.Profiles[i].Name, Level: i, NeedsBytes: pol.Profiles[i].Needs, Fits: fits})
		if fits {
			break
		}
	}
	return j
}

// free is the worst GPU's limit less its usage (0 when over).
func (j fitJudgement) free() uint64 {
	if j.worst.Used >= j.limit {
		return 0
	}
	return j.limit - j.worst.Used
}

// text says what was tried and against what, for people:
// "fp16 needs 40 GiB, does not fit; int8b needs 8 GiB, fits (GPU 0: 12 GiB free of 16 GiB, 10.4 GiB under high 0.90)".
func (j fitJudgement) text(pol *policy.Policy) string {
	parts := make([]string, 0, len(j.tried))
	for _, t := range j.tried {
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
	if j.known {
		s += fmt.Sprintf(" (GPU %d: %s free of %s, %s under high %.2f)", j.worst.Index,
			policy.FormatSize(j.free()), policy.FormatSize(j.limit), policy.FormatSize(j.room), pol.Watermark.High)
	}
	return s
}

// fitEvent is the journal's record of j; outcome says what came of it
// (starting in X, waiting, ...).
func (j fitJudgement) fitEvent(pol *policy.Policy, reason, outcome string) api.Event {
	ev := api.Event{Event: api.EventFit, Reason: reason, Tried: j.tried, Detail: outcome}
	if t := j.text(pol); t != "" {
		ev.Detail += ": " + t
	}
	if j.ok || j.started {
		ev.Profile, ev.Level, ev.To = pol.Profiles[j.level].Name, j.level, pol.Profiles[j.level].Name
	}
	if j.known {
		ev.FreeBytes, ev.LimitBytes = ptr(j.free()), j.limit
		ev.GPU, ev.GPUIndex = j.worst.UUID, ptr(j.worst.Index)
	}
	return ev
}

// noteFit journals and prints a fit judgement, and keeps it for status.
func (l *loop) noteFit(j fitJudgement, outcome string) { l.noteFitAt(time.Time{}, j, outcome) }

// noteFitAt is noteFit dated at (zero: now).
func (l *loop) noteFitAt(at time.Time, j fitJudgement, outcome string) {
	l.sayStartup()
	ev := j.fitEvent(l.pol, l.startReason(), outcome)
	ev.Time = at
	l.emit(ev)
	l.lastFit = l.out.last
	l.deps.Logf("fit for the %s: %s", l.startWhat(), ev.Detail)
}

// startReason is why the coming start happens: "start" for the first,
// else what ended the last child (oom, crash, watermark, ...).
func (l *loop) startReason() string {
	if l.starts == 0 && l.lastExit == "none" {
		return "start"
	}
	return l.lastExit
}

func (l *loop) startWhat() string {
	if r := l.startReason(); r != "start" {
		return "restart after " + r
	}
	return "start"
}

// neverFits is the policy's NeverFits on the watched GPUs of a sample.
func neverFits(pol *policy.Policy, devs []gpu.Device) string {
	if len(devs) == 0 {
		return ""
	}
	gpus := make([]policy.GPUTotal, len(devs))
	for i, d := range devs {
		gpus[i] = policy.GPUTotal{Index: d.Index, Total: d.Total}
	}
	return pol.NeverFits(gpus)
}

// stepFit judges whether profile to fits now for a manual step: on every
// watched GPU, the usage without the child's own (its processes where the
// backend knows them, else the current profile's needs estimate) plus to's
// needs must fit under high. "" when it fits or cannot be judged (no
// reading, a probe down, no needs estimate).
func (l *loop) stepFit(to int) string {
	p := l.pol.Profiles[to]
	if p.Needs == 0 || !l.haveSample || l.health.down() {
		return ""
	}
	s := l.lastSample
	// The child's own usage per GPU: its processes' where the backend
	// lists them, else the current profile's estimate on every GPU.
	listed := !s.ProcessesAt.IsZero()
	own := map[int]uint64{}
	if listed {
		for _, pr := range s.Processes {
			if l.childTree[pr.PID] {
				own[pr.Device] += pr.Used
			}
		}
	}
	for _, d := range s.Devices {
		mine := own[d.Index]
		if !listed {
			mine = l.pol.Profiles[l.level].Needs
		}
		used := d.Used - min(d.Used, mine)
		if l.pol.Fits(to, used, d.Total) {
			continue
		}
		limit := l.pol.Limit(d.Total)
		return fmt.Sprintf("profile %s does not fit: it needs %s, and GPU %d has %s free under high %.2f (%s of %s used without this child)",
			p.Name, policy.FormatSize(p.Needs), d.Index, policy.FormatSize(l.pol.Room(used, d.Total)),
			l.pol.Watermark.High, policy.FormatSize(used), policy.FormatSize(limit))
	}
	return ""
}

// describe composes the start-up line on the first probe result: what
// the config says (policy file, backend) and the GPUs it watches, so that
// a run that silently took ./policy.toml's simulated GPU says so. It is
// told with the first fit (sayStartup): a command that cannot run says so
// in one line of its own.
func (l *loop) describe(r sampleResult) {
	if l.startup != "" || l.cfg.Describe == "" {
		return
	}
	switch {
	case r.err != nil:
		l.startup = fmt.Sprintf("%s, watching no GPU yet (the first reading failed: %v)", l.cfg.Describe, r.err)
	case len(r.sample.Devices) == 0:
		l.startup = l.cfg.Describe + ", watching no GPU"
	default:
		gpus := make([]string, len(r.sample.Devices))
		for i, d := range r.sample.Devices {
			gpus[i] = fmt.Sprintf("GPU %d (%s, %s)", d.Index, d.Name, policy.FormatSize(d.Total))
		}
		l.startup = l.cfg.Describe + ", watching " + strings.Join(gpus, ", ")
	}
}

// sayStartup prints the start-up line, once.
func (l *loop) sayStartup() {
	if l.startup != "" && !l.startupSaid {
		l.startupSaid = true
		l.deps.Logf("%s", l.startup)
	}
}
