package cmd

import (
	"errors"

	"github.com/gpuguard/gpuguard/internal/frontdoor"
	"github.com/gpuguard/gpuguard/internal/journal"
	"github.com/gpuguard/gpuguard/internal/metrics"
	"github.com/gpuguard/gpuguard/internal/reload"
	"github.com/gpuguard/gpuguard/policy"
)

// newReloader is the run's reloader (package reload) wired to its flags:
// a re-read policy is resolved with the options the run started with
// (resolvePolicy), so a flag keeps overriding the file.
func newReloader(o *RunOptions, start *resolvedRun, m *metrics.Endpoint, jr interface{ SetLimits(journal.Limits) }, door *frontdoor.Door) *reload.Reloader {
	return &reload.Reloader{
		Start:    start.instance(),
		StateDir: start.stateDir,
		Parse:    []policy.Option{knownBackends()},
		Resolve: func(pol *policy.Policy) (reload.Instance, error) {
			r, err := resolvePolicy(o, pol)
			if err != nil {
				return reload.Instance{}, exitCause(err)
			}
			return r.instance(), nil
		},
		Metrics:    m,
		SetJournal: func(j policy.Journal) { jr.SetLimits(journalLimits(j)) },
		Door:       door,
	}
}

// instance is r as a reload compares it.
func (r *resolvedRun) instance() reload.Instance {
	return reload.Instance{Policy: r.pol, Command: r.command, Name: r.name, NameFrom: r.nameFrom,
		Devices: r.devices, DRMDevices: r.drmDevices}
}

// exitCause is a resolution's error without cmd's exit code, for the
// reload to report as a problem of the file: a *policy.Error anywhere in
// it as it is, else an ExitError's cause.
func exitCause(err error) error {
	var pe *policy.Error
	if errors.As(err, &pe) {
		return err
	}
	var ee *ExitError
	if errors.As(err, &ee) && ee.Err != nil {
		return ee.Err
	}
	return err
}
