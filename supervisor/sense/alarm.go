package sense

import "time"

// Alarm is one of the sampling schedule's timers (the sampler's, the hung
// deadline's). C delivers the time it fired. Close releases it at the end
// of a run.
//
// A runtime timer (NewRuntimeAlarm) delivers no fire from before a Stop or
// Reset after it. A kernel alarm (NewKernelAlarm) may deliver one from
// before a Reset (it fired as the Reset came): a receiver that must not
// act on such a fire compares the time it carries with the deadline it
// set (Pacer.Overdue). The sampler's own timer is reset only once its
// fire is taken, or after a Stop that reported true.
type Alarm interface {
	C() <-chan time.Time
	// Stop disarms it. True: no fire of the last arming comes. False: it
	// was not armed, or its fire has come or comes.
	Stop() bool
	// Reset arms it to fire once, d from now.
	Reset(d time.Duration)
	Close() error
}

// NewRuntimeAlarm is an Alarm on a runtime timer (time.Timer), the one
// testing/synctest's fake clock drives; disarmed.
func NewRuntimeAlarm() Alarm {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return runtimeAlarm{t}
}

type runtimeAlarm struct{ t *time.Timer }

func (a runtimeAlarm) C() <-chan time.Time   { return a.t.C }
func (a runtimeAlarm) Stop() bool            { return a.t.Stop() }
func (a runtimeAlarm) Reset(d time.Duration) { a.t.Reset(d) }
func (a runtimeAlarm) Close() error          { a.t.Stop(); return nil }
