package supervisor

import (
	"fmt"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/gpu"
)

// reporter is the loop's voice outward: every event goes through it to
// the observers (the journal, metrics, the control socket's followers),
// and the service manager hears the one-line status from it. It keeps
// the newest event for the status object and the last status line, so
// that an unchanged line is not sent again on every sample.
type reporter struct {
	name      string                             // the instance's name, stamped on every event
	inForce   func() (profile string, level int) // the profile in force, stamped on an event that names none; nil: none stamped
	log       func(format string, args ...any)   // gpuguard's log; nil: discarded
	observers []Observer
	notifier  Notifier   // nil: no service manager
	publisher Publisher  // nil: no socket subscribers
	last      *api.Event // the newest event, for status
	text      string     // the status line last sent
	told      statusLine // what text says
}

// statusLine is what the service manager's status line says.
type statusLine struct {
	state, profile string
	level, levels  int
	ratio          float64
}

func newReporter(name string, observers []Observer, n Notifier) reporter {
	return reporter{name: name, observers: observers, notifier: n}
}

// Emit stamps ev (its time when unset, the instance's name, the profile
// in force unless ev names its own) and hands it to every observer. A
// reload's event names the profile it left, which the new ladder may not
// have at the old level.
func (r *reporter) Emit(ev api.Event) {
	if ev.Profile == "" && r.inForce != nil {
		ev.Profile, ev.Level = r.inForce()
	}
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	ev.Name = r.name
	for _, o := range r.observers {
		o.Observe(ev)
	}
	r.last = &ev
}

// publish sends st to socket subscribers as a profile event.
func (r *reporter) publish(st api.ProfileState) {
	if r.publisher != nil {
		st.Type = "profile"
		r.publisher.Publish(st)
	}
}

// status tells the service manager what runs, when it changed.
func (r *reporter) status(state, profile string, level, levels int, ratio float64) {
	line := statusLine{state, profile, level, levels, ratio}
	if r.notifier == nil || line == r.told && r.text != "" {
		return
	}
	r.told = line
	t := fmt.Sprintf("%s: profile %s (%d/%d), watermark %.2f", state, profile, level, levels, ratio)
	if t != r.text {
		r.text = t
		_ = r.notifier.Status(t)
	}
}

// Logf writes a line to gpuguard's log.
func (r *reporter) Logf(format string, args ...any) {
	if r.log != nil {
		r.log(format, args...)
	}
}

// journal is where the rooms around the loop send what they tell: the
// loop's reporter, which stamps events with the profile in force, and
// gpuguard's log. The rooms take this, not the reporter, so that a test
// can hand them a recorder.
type journal interface {
	Emit(ev api.Event)
	Logf(format string, args ...any)
}

// publishSnapshot copies the loop's state out for Status and metrics. It
// runs after every event of the loop, every sample included, so it leaves
// out what Status derives when it is read (the uptimes, the lease count),
// and stores a snapshot or a tenant record only when it changed: a calm
// sample allocates nothing here (shown.go).
func (l *loop) publishSnapshot() {
	was := l.s.snap.Load()
	st := api.Status{
		Name: l.cfg.Name, PID: was.status.PID, State: l.life.state,
		Profile: l.pol.Profiles[l.life.level].Name, Level: l.life.level, Levels: len(l.pol.Profiles),
		Priority: l.pol.Priority, Watermark: l.latest.ratio, IntervalSeconds: l.pace.Period().Seconds(), ETASeconds: l.pace.ETASeconds(),
		Restarts: l.life.hist.restarts, Observe: l.cfg.Observe,
		LastEvent: l.out.last, Fit: l.fit.lastFit, GPUs: []api.GPU{}, SimDir: l.cfg.SimDir,
	}
	var childStart time.Time
	if l.life.run.child != nil {
		st.ChildPID, childStart = l.life.run.child.PID(), l.life.run.childStart
	}
	st.RoomFor = shownName(was.status.RoomFor, l.life.sleepsForName(l.pol))
	if sv := l.pol.Serve; sv.Enabled() {
		st.Serve, st.Models = sv.Listen, shownModels(was.status.Models, sv, l.cfg.Name)
	}
	if l.latest.haveSample {
		st.GPUs = shownGPUs(was.status.GPUs, l.latest.lastSample)
	}
	if !childStart.Equal(was.childStart) || !sameStatus(&st, &was.status) {
		l.s.snap.Store(&snapshot{status: st, childStart: childStart})
	}
	told := l.s.adm.tenant.Load()
	info := l.self.info(l.pol, told)
	if !sameTenant(&info, told) {
		stored := info // a copy: info itself stays off the heap
		l.s.adm.tenant.Store(&stored)
	}
	if l.peers != nil {
		l.peers.Publish(info, l.ledger.Outstanding)
	}
	short := l.core.StepPending() || l.life.plan != nil || l.latest.haveSample && l.latest.ratio >= l.pol.Watermark.High
	l.life.door.sync(l.pol.Profiles[l.life.level].Name, l.life.level, len(l.pol.Profiles), short, &l.s.short)
	// The service manager's status line, when what it says changed.
	l.out.status(l.life.state, l.pol.Profiles[l.life.level].Name, l.life.level, len(l.pol.Profiles), l.latest.ratio)
}

// statusGPUs is the status object's gpus: each device of s with the
// processes s found on it.
func statusGPUs(s gpu.Sample) []api.GPU {
	gpus := []api.GPU{}
	for _, d := range s.Devices {
		g := api.GPU{Index: d.Index, UUID: d.UUID, Name: d.Name, UsedBytes: d.Used, TotalBytes: d.Total}
		for _, p := range s.Processes {
			if p.Device == d.Index {
				g.Processes = append(g.Processes, api.GPUProcess{PID: p.PID, UsedBytes: p.Used})
			}
		}
		gpus = append(gpus, g)
	}
	return gpus
}
