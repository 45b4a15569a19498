package supervisor

import (
	"fmt"
	"strings"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/policy"
	"github.com/gpuguard/gpuguard/supervisor/core"
	"github.com/gpuguard/gpuguard/supervisor/sense"
)

// fitTeller tells how starts chose their profile: the start-up line
// (what the config says and the GPUs it watches) before the first fit,
// and the newest fit event, for status.
type fitTeller struct {
	startup     string
	startupSaid bool
	lastFit     *api.Event // the newest fit event
}

// describe composes the start-up line on the first probe result: what
// the config says (what: the policy file, the backend) and the GPUs it
// watches, so that a run that silently took ./policy.toml's simulated GPU
// says so. It is told with the first fit (sayStartup): a command that
// cannot run says so in one line of its own.
func (f *fitTeller) describe(what string, r sense.Result) {
	if f.startup != "" || what == "" {
		return
	}
	switch {
	case r.Err != nil:
		f.startup = fmt.Sprintf("%s, watching no GPU yet (the first reading failed: %v)", what, r.Err)
	case len(r.Sample.Devices) == 0:
		f.startup = what + ", watching no GPU"
	default:
		gpus := make([]string, len(r.Sample.Devices))
		for i, d := range r.Sample.Devices {
			gpus[i] = fmt.Sprintf("GPU %d (%s, %s)", d.Index, d.Name, policy.FormatSize(d.Total))
		}
		f.startup = what + ", watching " + strings.Join(gpus, ", ")
	}
}

// note journals (through out) and prints a fit judgement dated at
// (zero: now), for the start h is about to make for why, and keeps the
// event as out stamped it, for status. The line names why: "fit for the
// restart after manual step: ...".
func (f *fitTeller) note(out *reporter, pol *policy.Policy, h history, at time.Time, fit core.Fit, outcome string, why core.Reason) {
	f.sayStartup(out.Logf)
	ev := fit.Event(pol, string(why), outcome)
	ev.Time = at
	out.Emit(ev)
	f.lastFit = out.last
	out.Logf("fit for the %s: %s", h.launchWhat(why), ev.Detail)
}

// sayStartup prints the start-up line, once.
func (f *fitTeller) sayStartup(logf func(string, ...any)) {
	if f.startup != "" && !f.startupSaid {
		f.startupSaid = true
		logf("%s", f.startup)
	}
}
