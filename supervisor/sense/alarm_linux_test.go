package sense

import (
	"context"
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

// kernelAlarm is NewKernelAlarm's, or the test ends: a timerfd is there on
// every Linux this runs on.
func newTestKernelAlarm(t *testing.T) *kernelAlarm {
	t.Helper()
	a, ok := NewKernelAlarm().(*kernelAlarm)
	if !ok {
		t.Fatal("NewKernelAlarm fell back to a runtime timer")
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// receive waits for a fire, failing the test after a minute.
func receive(t *testing.T, a Alarm) time.Time {
	t.Helper()
	select {
	case at := <-a.C():
		return at
	case <-time.After(time.Minute):
		t.Fatal("the alarm never fired")
		return time.Time{}
	}
}

// expired waits until the kernel timer has expired (it reads as disarmed).
func expired(t *testing.T, a *kernelAlarm) {
	t.Helper()
	for {
		var cur unix.ItimerSpec
		if err := unix.TimerfdGettime(int(a.fd), &cur); err != nil {
			t.Fatal(err)
		}
		if cur.Value.Sec == 0 && cur.Value.Nsec == 0 {
			return
		}
		runtime.Gosched()
	}
}

// TestKernelAlarmFires: Reset arms it once, d from now; a Reset to 0 fires
// at once, as a runtime timer's does.
func TestKernelAlarmFires(t *testing.T) {
	a := newTestKernelAlarm(t)
	armed := time.Now()
	a.Reset(5 * time.Millisecond)
	if at := receive(t, a); at.Sub(armed) < 5*time.Millisecond {
		t.Errorf("fired %s after it was armed for 5ms", at.Sub(armed))
	}
	a.Reset(0)
	receive(t, a)
	if a.Stop() {
		t.Error("Stop after the fire was taken reported a pending one")
	}
	// A calm instance's timers fire once a sample: no allocation each.
	if n := testing.AllocsPerRun(50, func() { a.Reset(0); <-a.C() }); n != 0 {
		t.Errorf("%v allocations a fire, want 0", n)
	}
}

// TestKernelAlarmStop: Stop disarms a pending alarm and says so; once it
// has fired, Stop says false and the fire is still delivered (the pacer
// counts on it: "that call is under way, and its result comes next").
func TestKernelAlarmStop(t *testing.T) {
	a := newTestKernelAlarm(t)
	a.Reset(time.Hour)
	if !a.Stop() {
		t.Error("Stop of an armed alarm reported nothing pending")
	}
	if a.Stop() {
		t.Error("a second Stop reported a pending fire")
	}
	a.Reset(time.Millisecond)
	expired(t, a)
	if a.Stop() {
		t.Error("Stop after the kernel fired reported it pending")
	}
	receive(t, a)
}

// TestKernelAlarmClose: Close ends the relay goroutine, and a Reset or a
// Stop after it does nothing.
func TestKernelAlarmClose(t *testing.T) {
	defer goleak.VerifyNone(t)
	a := NewKernelAlarm()
	a.Reset(time.Millisecond)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	a.Reset(time.Millisecond)
	if a.Stop() {
		t.Error("Stop after Close reported a pending fire")
	}
	if err := a.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}

// TestPacerOnKernelAlarms: with kernel alarms the samples come at their
// period, the hung deadline moves on with each result, and a hung fire
// from before it moved is not Overdue.
func TestPacerOnKernelAlarms(t *testing.T) {
	defer goleak.VerifyNone(t)
	const period = 5 * time.Millisecond
	p := NewPacer(idleProbe{}, time.Minute, period, NewKernelAlarm) // a timeout no stall under load reaches
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		p.Run(context.Background(), done)
	}()
	p.ArmNow()
	p.Wake()
	var last time.Time
	for i := range 10 {
		var r Result
		select {
		case r = <-p.Results():
		case at := <-p.Hung():
			if p.Overdue(at) {
				t.Fatalf("sample %d: a call that returns at once was hung", i)
			}
			continue
		case <-time.After(time.Minute):
			t.Fatalf("sample %d never came", i)
		}
		if i > 1 && r.Due.Sub(last) < period {
			t.Errorf("sample %d due %s after the one before, want >= %s", i, r.Due.Sub(last), period)
		}
		last = r.Due
		now := time.Now()
		p.SetPeriod(period, period)
		p.Reschedule(r, now)
		if p.Overdue(now) {
			t.Errorf("sample %d: the hung deadline is not ahead after a result", i)
		}
		p.Wake()
	}
	close(done)
	<-ended
	p.Stop()
}
