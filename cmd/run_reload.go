package cmd

import (
	"errors"
	"fmt"
	"slices"

	"github.com/gpuguard/gpuguard/frontdoor"
	"github.com/gpuguard/gpuguard/journal"
	"github.com/gpuguard/gpuguard/metrics"
	"github.com/gpuguard/gpuguard/policy"
	"github.com/gpuguard/gpuguard/supervisor"
)

// runReloader re-reads a running instance's policy for `gpuguard reload`
// (it is the supervisor's Reloader). It reads exactly the file the run
// started with and resolves it with the run's own flags (resolvePolicy, as
// at start), so a flag keeps overriding the file. It refuses, with nothing
// changed, a file that is invalid, one that would change what only a new
// run can (the instance's name, the backend, the devices), and a metrics
// address that cannot be bound; a run that started from the built-in
// defaults has no file to re-read and refuses every reload.
type runReloader struct {
	opts    *RunOptions
	start   *resolvedRun
	metrics *metrics.Endpoint
	journal interface{ SetLimits(journal.Limits) }
	door    *frontdoor.Door // nil without [serve] listen
}

var _ supervisor.Reloader = (*runReloader)(nil)

// errNoPolicyFile refuses the reload of an instance started without a file.
var errNoPolicyFile = &policy.Error{Msg: "this instance runs on the built-in defaults (no policy file was found at start): " +
	"there is nothing to re-read; restart it with --policy FILE to make it reloadable"}

// Load reads and resolves the policy, checks that it keeps the instance
// what it is, and binds a changed metrics address (Commit serves there;
// Abort lets it go); changed journal limits are set at Commit.
func (rr *runReloader) Load(cur *policy.Policy) (*supervisor.Reload, error) {
	src := rr.start.pol.Source
	if src == "" {
		return nil, policy.ErrorList{errNoPolicyFile}
	}
	data, err := policy.ReadRegularFile(src)
	if err != nil {
		return nil, err
	}
	pol, err := policy.Parse(data, src, knownBackends())
	if err != nil {
		return nil, err
	}
	r, err := resolvePolicy(rr.opts, pol)
	if err != nil {
		return nil, policy.ErrorList{asPolicyError(src, err)}
	}
	if errs := rr.sameInstance(r, data); len(errs) > 0 {
		return nil, errs
	}
	rl := &supervisor.Reload{Policy: r.pol, Command: r.command, CheckpointPath: r.pol.Checkpoint.Resolve(rr.start.stateDir)}
	var commits []func()
	if addr := r.pol.Metrics.Listen; addr != cur.Metrics.Listen {
		mv, err := rr.metrics.Prepare(addr)
		if err != nil {
			return nil, policy.ErrorList{keyError(src, data, "metrics.listen", err.Error())}
		}
		commits = append(commits, mv.Commit)
		rl.Abort = mv.Abort
	}
	if r.pol.Serve != cur.Serve {
		s := r.pol.Serve
		commits = append(commits, func() { rr.door.Configure(s) })
	}
	if r.pol.Journal != cur.Journal {
		limits := journalLimits(r.pol.Journal)
		commits = append(commits, func() { rr.journal.SetLimits(limits) })
	}
	if len(commits) > 0 {
		rl.Commit = func() {
			for _, c := range commits {
				c()
			}
		}
	}
	return rl, nil
}

// sameInstance refuses a resolved policy that would make the instance
// another one: a new name (from the file's name, or from its command's
// base name when no --name or name fixes it), another backend (unless
// --backend fixes it) or other devices (which follow the backend: --devices
// and the *_VISIBLE_DEVICES variables cannot change in a running process).
func (rr *runReloader) sameInstance(r *resolvedRun, data []byte) policy.ErrorList {
	src, was := rr.start.pol.Source, rr.start
	var errs policy.ErrorList
	if r.name != was.name {
		errs = append(errs, keyError(src, data, r.nameFrom, fmt.Sprintf("would rename the instance from %q to %q; restart gpuguard to rename it", was.name, r.name)))
	}
	if r.pol.Serve.Listen != was.pol.Serve.Listen {
		errs = append(errs, keyError(src, data, "serve.listen", fmt.Sprintf("changed from %q to %q; restart gpuguard to move the front door", was.pol.Serve.Listen, r.pol.Serve.Listen)))
	}
	if r.pol.Defer.Store != was.pol.Defer.Store {
		errs = append(errs, keyError(src, data, "defer.store", fmt.Sprintf("changed from %q to %q; restart gpuguard to move the deferred-task queue",
			was.pol.Defer.RedactedStore(), r.pol.Defer.RedactedStore())))
	}
	switch {
	case r.pol.Watch.Backend != was.pol.Watch.Backend:
		errs = append(errs, keyError(src, data, "watch.backend", fmt.Sprintf("changed from %q to %q; restart gpuguard to change the backend", was.pol.Watch.Backend, r.pol.Watch.Backend)))
	case !slices.Equal(r.devices, was.devices) || !slices.Equal(r.drmDevices, was.drmDevices):
		errs = append(errs, keyError(src, data, "watch.backend", fmt.Sprintf("would watch other devices (%q instead of %q); restart gpuguard to change them", r.devices, was.devices)))
	}
	return errs
}

// keyError is a problem with key in the file src (text data), at the
// key's line, in the form policy check prints.
func keyError(src string, data []byte, key, msg string) *policy.Error {
	return &policy.Error{File: src, Line: policy.Locate(data, key), Key: key, Msg: msg}
}

// asPolicyError makes a problem found while resolving (no command, an
// unknown ${VAR} in the command line's CMD) a problem of the file src.
func asPolicyError(src string, err error) *policy.Error {
	var pe *policy.Error
	if errors.As(err, &pe) {
		return pe
	}
	var ee *ExitError
	if errors.As(err, &ee) && ee.Err != nil {
		err = ee.Err
	}
	return &policy.Error{File: src, Msg: err.Error(), Err: err}
}
