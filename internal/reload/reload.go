package reload

import (
	"errors"
	"fmt"
	"slices"

	"github.com/gpuguard/gpuguard/internal/frontdoor"
	"github.com/gpuguard/gpuguard/internal/metrics"
	"github.com/gpuguard/gpuguard/policy"
	"github.com/gpuguard/gpuguard/supervisor"
)

// Instance is a resolved run as a reload sees it: the policy and command
// it runs, and what makes it this instance and no other.
type Instance struct {
	Policy  *policy.Policy
	Command []string
	Name    string
	// NameFrom is the policy key the name came from: "name", "command"
	// (its base name), or "" when --name gave it.
	NameFrom string
	Devices  []string
	// DRMDevices is auto's selection if it falls back to DRM.
	DRMDevices []string
}

// Reloader is the supervisor's Reloader for one run.
type Reloader struct {
	// Start is the run as it started; Start.Policy.Source is the file
	// re-read ("" for the built-in defaults: every reload is refused).
	Start    Instance
	StateDir string // where a relative checkpoint path resolves
	// Parse are the options the policy is read with (the backend names).
	Parse []policy.Option
	// Resolve resolves a re-read policy as the run's flags resolved it at
	// start. An error that is not a *policy.Error becomes one of the file.
	Resolve func(*policy.Policy) (Instance, error)
	Metrics *metrics.Endpoint
	// SetJournal applies a changed [journal] at Commit.
	SetJournal func(policy.Journal)
	Door       *frontdoor.Door // nil without [serve] listen
}

var _ supervisor.Reloader = (*Reloader)(nil)

// errNoPolicyFile refuses the reload of an instance started without a file.
var errNoPolicyFile = &policy.Error{Msg: "this instance runs on the built-in defaults (no policy file was found at start): " +
	"there is nothing to re-read; restart it with --policy FILE to make it reloadable"}

// Load reads and resolves the policy, checks that it keeps the instance
// what it is, and binds a changed metrics address (Commit serves there;
// Abort lets it go); changed journal limits are set at Commit.
func (rr *Reloader) Load(cur *policy.Policy) (*supervisor.Reload, error) {
	src := rr.Start.Policy.Source
	if src == "" {
		return nil, policy.ErrorList{errNoPolicyFile}
	}
	data, err := policy.ReadRegularFile(src)
	if err != nil {
		return nil, err
	}
	pol, err := policy.Parse(data, src, rr.Parse...)
	if err != nil {
		return nil, err
	}
	r, err := rr.Resolve(pol)
	if err != nil {
		return nil, policy.ErrorList{asPolicyError(src, err)}
	}
	if errs := rr.sameInstance(r, data); len(errs) > 0 {
		return nil, errs
	}
	rl := &supervisor.Reload{Policy: r.Policy, Command: r.Command, CheckpointPath: r.Policy.Checkpoint.Resolve(rr.StateDir)}
	var commits []func()
	if addr := r.Policy.Metrics.Listen; addr != cur.Metrics.Listen {
		mv, err := rr.Metrics.Prepare(addr)
		if err != nil {
			return nil, policy.ErrorList{keyError(src, data, "metrics.listen", err.Error())}
		}
		commits = append(commits, mv.Commit)
		rl.Abort = mv.Abort
	}
	if !r.Policy.Serve.Equal(cur.Serve) {
		s := r.Policy.Serve
		commits = append(commits, func() { rr.Door.Configure(s) })
	}
	if r.Policy.Journal != cur.Journal {
		j := r.Policy.Journal
		commits = append(commits, func() { rr.SetJournal(j) })
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
func (rr *Reloader) sameInstance(r Instance, data []byte) policy.ErrorList {
	src, was := rr.Start.Policy.Source, rr.Start
	var errs policy.ErrorList
	if r.Name != was.Name {
		errs = append(errs, keyError(src, data, r.NameFrom, fmt.Sprintf("would rename the instance from %q to %q; restart gpuguard to rename it", was.Name, r.Name)))
	}
	if r.Policy.Serve.Listen != was.Policy.Serve.Listen {
		errs = append(errs, keyError(src, data, "serve.listen", fmt.Sprintf("changed from %q to %q; restart gpuguard to move the front door", was.Policy.Serve.Listen, r.Policy.Serve.Listen)))
	}
	if r.Policy.Defer.Store != was.Policy.Defer.Store {
		errs = append(errs, keyError(src, data, "defer.store", fmt.Sprintf("changed from %q to %q; restart gpuguard to move the deferred-task queue",
			was.Policy.Defer.RedactedStore(), r.Policy.Defer.RedactedStore())))
	}
	switch {
	case r.Policy.Watch.Backend != was.Policy.Watch.Backend:
		errs = append(errs, keyError(src, data, "watch.backend", fmt.Sprintf("changed from %q to %q; restart gpuguard to change the backend", was.Policy.Watch.Backend, r.Policy.Watch.Backend)))
	case !slices.Equal(r.Devices, was.Devices) || !slices.Equal(r.DRMDevices, was.DRMDevices):
		errs = append(errs, keyError(src, data, "watch.backend", fmt.Sprintf("would watch other devices (%q instead of %q); restart gpuguard to change them", r.Devices, was.Devices)))
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
	return &policy.Error{File: src, Msg: err.Error(), Err: err}
}
