package api

// Public is st as a listener that anyone may reach shows it (the front
// door's status path, `gpuguard door`'s model list): its last event keeps
// only time, event, profile, level and reason. The rest of an event is for
// the instance's own user, who reads it on the control socket and in the
// journal: a deferral's ticket (which reads another client's result at
// its status URL), a dead child's stderr (tokens, paths, prompts), a
// request's path, a lease.
func (st Status) Public() Status {
	if ev := st.LastEvent; ev != nil {
		st.LastEvent = &Event{Time: ev.Time, Event: ev.Event, Profile: ev.Profile, Level: ev.Level, Reason: ev.Reason}
	}
	return st
}
