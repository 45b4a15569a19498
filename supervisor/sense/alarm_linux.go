package sense

import (
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// NewKernelAlarm is an Alarm on a kernel timer (timerfd) that the
// runtime's network poller waits on, read and set with raw system calls;
// a runtime timer (NewRuntimeAlarm) when no timerfd can be had.
//
// Why: a calm instance wakes once a sample, and a runtime timer wakes two
// threads for it. The runtime's sysmon thread, when every processor is
// idle, sleeps until the next runtime timer is due, then naps 10 ms and
// looks again before it sleeps once more: two wake-ups a second beside the
// sample's own at the default calm period, about a third of a calm
// instance's CPU time. A timerfd's expiry wakes only the thread waiting in
// the poller, and sysmon sleeps on, until the next runtime timer or for
// 60 s (the pacer's hung deadline, moved on at every sample, is a kernel
// alarm too: as a runtime timer, moved later, it would still wake both
// threads at the time it was first set for). A system call made through
// the syscall package would wake a sleeping sysmon as it enters; these
// calls never block, so they are made raw and do not. Measured in
// docs/performance.md ("Issue 39, finished").
func NewKernelAlarm() Alarm {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return NewRuntimeAlarm()
	}
	f := os.NewFile(uintptr(fd), "timerfd")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return NewRuntimeAlarm()
	}
	a := &kernelAlarm{f: f, fd: uintptr(fd), c: make(chan time.Time), done: make(chan struct{})}
	go a.relay(rc)
	return a
}

// kernelAlarm is a timerfd and the goroutine (relay) that waits for it in
// the poller and hands each expiry to C. C is unbuffered, as a runtime
// timer's channel behaves: an expiry waits in the relay until taken.
//
// Setting a timerfd clears an expiry not yet read, and the poller reports
// a timerfd only while an expiry is there to read. A Stop that clears one
// (armed says one may be there) makes up for it: it arms the timer to
// expire again at once, for the relay to read and deliver, so that Stop
// reporting false always means a fire comes. A Reset drops it, as a
// runtime timer's Reset does; an expiry the relay has read is delivered.
type kernelAlarm struct {
	f    *os.File
	fd   uintptr
	c    chan time.Time
	done chan struct{}

	mu     sync.Mutex
	armed  bool // set, and its expiry not yet read
	fired  bool // an expiry read and not yet handed to C
	closed bool
	ticks  [8]byte
}

func (a *kernelAlarm) C() <-chan time.Time { return a.c }

func (a *kernelAlarm) relay(rc syscall.RawConn) {
	read := func(fd uintptr) bool { // made once: a closure per wait would be an allocation per fire
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.closed {
			return true
		}
		n, _, e := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&a.ticks[0])), uintptr(len(a.ticks)))
		if e == 0 && n == uintptr(len(a.ticks)) {
			a.fired, a.armed = true, false
		}
		return a.fired
	}
	for {
		err := rc.Read(read)
		a.mu.Lock()
		fired, closed := a.fired, a.closed
		a.fired = false
		a.mu.Unlock()
		if err != nil || closed {
			return
		}
		if !fired {
			continue
		}
		select {
		case a.c <- time.Now():
		case <-a.done:
			return
		}
	}
}

// settimeLocked sets the timer to expire once, after ns nanoseconds (0:
// disarm), and reports whether it was set and had not yet expired.
func (a *kernelAlarm) settimeLocked(ns int64) (pending bool) {
	next := unix.ItimerSpec{Value: unix.NsecToTimespec(ns)}
	var old unix.ItimerSpec
	_, _, e := unix.RawSyscall6(unix.SYS_TIMERFD_SETTIME, a.fd, 0,
		uintptr(unsafe.Pointer(&next)), uintptr(unsafe.Pointer(&old)), 0, 0)
	return e == 0 && (old.Value.Sec != 0 || old.Value.Nsec != 0)
}

func (a *kernelAlarm) Stop() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return false
	}
	if a.settimeLocked(0) {
		a.armed = false
		return true
	}
	if a.armed { // it expired unread, and disarming cleared that: again
		a.settimeLocked(1)
	}
	return false
}

// Reset arms it; a timerfd with a zero time is disarmed, so d <= 0 fires
// after a nanosecond, at once as a runtime timer would.
func (a *kernelAlarm) Reset(d time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return
	}
	a.settimeLocked(max(int64(d), 1))
	a.armed = true
}

// Close ends the relay and closes the timerfd. The file is closed outside
// mu: closing waits for the relay's read, which may be waiting for mu.
func (a *kernelAlarm) Close() error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	close(a.done)
	a.mu.Unlock()
	return a.f.Close()
}
