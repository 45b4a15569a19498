//go:build !linux

package sense

// NewKernelAlarm is a runtime timer here: the kernel timer it stands for
// on Linux (a timerfd) has no portable counterpart.
func NewKernelAlarm() Alarm { return NewRuntimeAlarm() }
