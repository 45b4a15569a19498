package supervisor

import (
	"fmt"

	"github.com/gpuguard/gpuguard/api"
)

// The state file is how the child learns of a live change, so a change
// whose state file cannot be written (a full disk, a read-only state dir)
// does not happen: no signal is sent (the child would read the old
// profile), no event is published, and the level stays. A manual step is
// answered with the reason; a watermark step is tried again at the next
// sample, and a run of failures is journaled once.

// stateFile is what the loop remembers of its state file writes.
type stateFile struct {
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

// writeStateAt replaces the state file with profile level under the next
// seq and returns what it wrote. The seq is taken only when the write
// succeeds.
func (l *loop) writeStateAt(level int, reason string) (api.ProfileState, error) {
	p := l.pol.Profiles[level]
	st := api.ProfileState{Seq: l.seq + 1, Level: level, Profile: p.Name, Env: p.Env, Reason: reason}
	if st.Env == nil {
		st.Env = map[string]string{}
	}
	if err := l.deps.WriteState(l.cfg.StatePath, st); err != nil {
		return st, fmt.Errorf("writing the state file: %w", err)
	}
	l.seq = st.Seq
	l.stateFile.reason = reason
	if l.stateFile.failing {
		l.stateFile.failing = false
		l.deps.Logf("the state file is written again")
	}
	return st, nil
}

// stateWritable rewrites the state file as it is (same seq, profile and
// reason), to learn before a restart is begun whether the restarted child
// will find its state file.
func (l *loop) stateWritable() error {
	p := l.pol.Profiles[l.level]
	st := api.ProfileState{Seq: l.seq, Level: l.level, Profile: p.Name, Env: p.Env, Reason: l.stateFile.reason}
	if st.Env == nil {
		st.Env = map[string]string{}
	}
	if err := l.deps.WriteState(l.cfg.StatePath, st); err != nil {
		return fmt.Errorf("not stepping: writing the state file: %w", err)
	}
	return nil
}

// stateNotWritten handles a live change to level that did not happen
// because its state file could not be written (err).
func (l *loop) stateNotWritten(event string, level int, err error, reply chan response) {
	to := l.pol.Profiles[level].Name
	if reply != nil {
		reply <- response{err: fmt.Errorf("not stepping to %s: %w", to, err)}
		return
	}
	if l.stateFile.failing {
		return // journaled once per run of failures; retried every sample
	}
	l.stateFile.failing = true
	detail := fmt.Sprintf("%s to %s not taken: %v; trying again at the next sample", event, to, err)
	l.emit(api.Event{Event: EventStateError, Watermark: l.ratio, From: l.pol.Profiles[l.level].Name, To: to, Detail: detail})
	l.deps.Logf("%s", detail)
}
