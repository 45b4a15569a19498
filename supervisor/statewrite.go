package supervisor

import (
	"fmt"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/policy"
)

// The state file is how the child learns of a live change, so a change
// whose state file cannot be written (a full disk, a read-only state dir)
// does not happen: no signal is sent (the child would read the old
// profile), no event is published, and the level stays. A manual step is
// answered with the reason; a watermark step is tried again at the next
// sample, and a run of failures is journaled once.

// stateFile writes the state file and remembers what it wrote: its own
// job, so the loop hands it the profile and asks, instead of carrying
// the seq and the failing flag itself.
type stateFile struct {
	path  string                                       // the state file (Config.StatePath)
	write func(path string, st api.ProfileState) error // Deps.WriteState
	logf  func(format string, args ...any)
	// seq is the seq of the last state written.
	seq int
	// reason is the reason of the last state written.
	reason string
	// failing: the last write failed and was journaled; cleared by the
	// next one that succeeds.
	failing bool
}

// EventStateError is the journal event of a change not made because the
// state file could not be written (once per run of failures).
const EventStateError = "state_error"

// writeAt replaces the state file with profile p (at level) under the
// next seq and returns what it wrote. The seq is taken only when the
// write succeeds.
func (f *stateFile) writeAt(p policy.Profile, level int, reason string) (api.ProfileState, error) {
	st := profileState(f.seq+1, p, level, reason)
	if err := f.write(f.path, st); err != nil {
		return st, fmt.Errorf("writing the state file: %w", err)
	}
	f.seq = st.Seq
	f.reason = reason
	if f.failing {
		f.failing = false
		f.logf("the state file is written again")
	}
	return st, nil
}

// writable rewrites the state file as it is (same seq and reason, profile
// p at level), to learn before a restart is begun whether the restarted
// child will find its state file.
func (f *stateFile) writable(p policy.Profile, level int) error {
	if err := f.write(f.path, profileState(f.seq, p, level, f.reason)); err != nil {
		return fmt.Errorf("not stepping: writing the state file: %w", err)
	}
	return nil
}

// profileState is the state file's content for profile p at level: its
// env as {} when it has none, so the child always finds an object.
func profileState(seq int, p policy.Profile, level int, reason string) api.ProfileState {
	st := api.ProfileState{Seq: seq, Level: level, Profile: p.Name, Env: p.Env, Reason: reason}
	if st.Env == nil {
		st.Env = map[string]string{}
	}
	return st
}

// startFailing marks a run of failed writes begun, and says whether this
// failure is its first (the one to journal).
func (f *stateFile) startFailing() bool {
	if f.failing {
		return false
	}
	f.failing = true
	return true
}

// notWritten handles a live change from level from to level that did not happen
// because its state file could not be written (err).
func (f *stateFile) notWritten(j journal, pol *policy.Policy, from int, ratio float64, event string, level int, err error, reply chan response) {
	to := pol.Profiles[level].Name
	if reply != nil {
		reply <- response{err: fmt.Errorf("not stepping to %s: %w", to, err)}
		return
	}
	if !f.startFailing() {
		return // journaled once per run of failures; retried every sample
	}
	detail := fmt.Sprintf("%s to %s not taken: %v; trying again at the next sample", event, to, err)
	j.Emit(api.Event{Event: EventStateError, Watermark: ratio, From: pol.Profiles[from].Name, To: to, Detail: detail})
	j.Logf("%s", detail)
}
