package supervisor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/policy"
	"github.com/gpuguard/gpuguard/supervisor/core"
)

// Reloader re-reads the policy file the instance was started with,
// resolved as at start (the command-line flags still win), for Reload. Load
// runs off the loop (it reads the file). cur is the policy in force: Load
// prepares, but does not apply, what the new policy changes outside the
// loop (a new metrics listener); it refuses, with nothing changed, a policy
// that is invalid or that changes what only a restart can (the name, the
// backend, the devices). Its error then holds every problem (a
// policy.ErrorList, or any error that unwraps to a list).
type Reloader interface {
	Load(cur *policy.Policy) (*Reload, error)
}

// Reload is a re-read policy, ready for the loop to apply at once.
type Reload struct {
	Policy *policy.Policy
	// Command and CheckpointPath are what the next start uses.
	Command        []string
	CheckpointPath string
	// Commit applies what Load prepared outside the loop, once the loop
	// has applied the policy; Abort undoes it when the loop never got the
	// reload. Exactly one of them is called (either may be nil); the loop
	// calls Commit, so it must return at once.
	Commit, Abort func()
}

// ReloadError is a refused reload: nothing changed. It unwraps to every
// problem, each naming the file, line and key where it can.
type ReloadError struct {
	Problems []error
}

func (e *ReloadError) Error() string {
	msg := "policy not reloaded (nothing changed): " + e.Problems[0].Error()
	if n := len(e.Problems) - 1; n > 0 {
		msg += fmt.Sprintf(" (and %d more problem%s)", n, map[bool]string{true: "s"}[n > 1])
	}
	return msg
}

func (e *ReloadError) Unwrap() []error { return e.Problems }

// refusal turns Load's error into a ReloadError listing its problems.
func refusal(err error) *ReloadError {
	var list interface{ Unwrap() []error }
	if errors.As(err, &list) && len(list.Unwrap()) > 0 {
		return &ReloadError{Problems: list.Unwrap()}
	}
	return &ReloadError{Problems: []error{err}}
}

// maxProblemsJournaled bounds the detail of a refused reload's event: a
// hostile file's thousand problems stay on the reloading command's stderr.
const maxProblemsJournaled = 5

// Reload re-reads the instance's policy (Deps.Reloader) and applies it at
// once on the loop: it returns the keys that changed (policy.Diff; empty
// when none did). A refused reload returns a *ReloadError and changes
// nothing. Either way the reload is journaled (a `reload` event, reason
// "error" when refused) and so counted in gpuguard_reloads_total. Reloads
// are taken one at a time.
func (s *Supervisor) Reload(ctx context.Context) ([]string, error) {
	if s.deps.Reloader == nil {
		return nil, errors.New("this instance cannot reload its policy")
	}
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	rl, err := s.deps.Reloader.Load(s.pol.Load())
	if err != nil {
		rerr := refusal(err)
		s.refused(ctx, rerr)
		return nil, rerr
	}
	r := request{op: opReload, reload: rl, reply: make(chan response, 1)}
	if err := s.port.send(ctx, r); err != nil {
		if rl.Abort != nil {
			rl.Abort()
		}
		return nil, err
	}
	resp, err := s.port.await(ctx, r)
	return resp.changed, err
}

// refused journals (and so counts) a refused reload, and logs it.
func (s *Supervisor) refused(ctx context.Context, e *ReloadError) {
	shown := e.Problems[:min(len(e.Problems), maxProblemsJournaled)]
	parts := make([]string, len(shown))
	for i, p := range shown {
		parts[i] = p.Error()
	}
	detail := strings.Join(parts, "; ")
	if n := len(e.Problems) - len(shown); n > 0 {
		detail += fmt.Sprintf("; and %d more", n)
	}
	s.deps.Logf("reload refused, nothing changed: %s", detail)
	_, _ = s.port.call(ctx, request{op: opEmit, event: api.Event{Event: api.EventReload, Reason: api.ReasonError, Detail: detail}})
}

// defaultProbeTimeout is Config.ProbeTimeout's default: long enough for a
// slow driver call, five polling periods at the least.
func defaultProbeTimeout(p *policy.Policy) time.Duration {
	return max(5*p.Watch.Interval, 2*time.Second)
}

// applyReload makes the reloaded policy the one in force, with everything
// derived from it, in one step of the loop: the thresholds, timers,
// restart, notify and OOM settings are read from l.pol where they are used,
// so they apply from the next sample or exit; the sampler's probe timeout,
// the command and the checkpoint path are set here; the ladder is mapped
// by name (reladder); what lies outside the loop is committed. The status,
// the tenant answer and the tenants' published facts show the new policy
// before the reply goes out: whoever asks after a reload sees it.
func (l *loop) applyReload(r request) {
	rl, old := r.reload, l.pol
	changed := policy.Diff(old, rl.Policy)
	// The event names the profile the instance was in when it reloaded.
	ev := api.Event{Event: api.EventReload, Changed: changed, Profile: old.Profiles[l.life.level].Name, Level: l.life.level}
	l.pol = rl.Policy
	l.s.pol.Store(rl.Policy)
	l.cfg.Command, l.cfg.CheckpointPath = rl.Command, rl.CheckpointPath
	if l.s.probeAuto {
		l.pace.SetTimeout(defaultProbeTimeout(l.pol))
	}
	if rl.Commit != nil {
		rl.Commit()
	}
	l.out.Emit(ev)
	if len(changed) == 0 {
		l.deps.Logf("policy %s reloaded: nothing changed", l.pol.Source)
	} else {
		l.deps.Logf("policy %s reloaded: changed %s", l.pol.Source, strings.Join(changed, ", "))
	}
	if slices.Contains(changed, "profile") {
		l.reladder(old)
	}
	if slices.ContainsFunc(changed, senses) {
		// The next sample judges by the new thresholds and sets the
		// period by the new intervals: take it now, not a period away.
		l.pace.SampleNow()
	}
	l.publishSnapshot()
	r.reply <- response{changed: changed}
}

// senses reports whether key is read when a sample is judged or the next
// one scheduled.
func senses(key string) bool {
	return strings.HasPrefix(key, "watch.") || strings.HasPrefix(key, "watermark.")
}

// reladder applies core.Reladder's verdict after a reload changed the
// ladder. A profile still in the ladder keeps its process (the state file
// is rewritten and published, since the file changed, never the notify
// signal, since what runs has not changed; the new definition of that
// profile applies at the next start or live step into it). A child whose
// profile is gone is restarted gracefully (stop_signal, then the normal
// restart path, GPUGUARD_LAST_EXIT=reload) at the same position in the new
// ladder, or the best profile below it that fits. An instance asleep with
// its child stopped whose level now serves requests starts the child there.
func (l *loop) reladder(old *policy.Policy) {
	planLevel := -1
	if l.life.plan != nil {
		planLevel = l.life.plan.level
	}
	r := core.Reladder(old, l.pol, l.life.level, l.life.wait.target, planLevel, l.life.stoppedAsleep(), l.life.running())
	l.life.level, l.life.wait.target = r.Level, r.Target
	if l.life.plan != nil {
		l.life.plan.level = r.PlanLevel
	}
	name := l.pol.Profiles[r.Level].Name
	switch r.Then {
	case core.RelevelWake:
		l.deps.Logf("reload: profile %s serves requests: starting the child", name)
		l.life.plan = &restartPlan{level: r.Level, reason: api.ReasonReload, from: r.From}
		l.life.enterWaiting(r.Level, nil, api.ReasonReload)
	case core.RelevelRestart:
		l.deps.Logf("profile %s is no longer in the ladder: restarting the child", r.From)
		l.life.beginRestart(l.pol, r.Level, api.ReasonReload, nil, false)
		l.life.plan.from = r.From
	case core.RelevelRewrite:
		st, err := l.life.file.writeAt(l.pol.Profiles[r.Level], r.Level, fmt.Sprintf("reload: profile %s is now level %d of %d", r.From, r.Level, len(l.pol.Profiles)))
		if err != nil {
			l.deps.Logf("%v", err)
		}
		l.out.publish(st)
	}
}
