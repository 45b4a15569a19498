//go:build cgo

package nvml

import (
	"fmt"
	"strings"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuguard/gpuguard/gpu"
)

// faultEvents are the event types listened to: critical Xids, and
// double-bit ECC errors (reported as Xid 48, which they are) where the GPU
// supports them.
const faultEvents = uint64(gonvml.EventTypeXidCriticalError | gonvml.EventTypeDoubleBitEccError)

// noInstance is the GPU/compute instance id of an event that is not about
// one MIG instance.
const noInstance = 0xFFFFFFFF

// watched is what the event goroutine knows of a watched device: a copy,
// so it never touches the probe's devices, which the sampler changes.
type watched struct {
	uuid   string
	index  int
	parent string
	gi, ci int
}

// events listens on an NVML event set on a goroutine of its own: Wait
// blocks in the driver, so it must never run on the supervisor's loop.
type events struct {
	set     gonvml.EventSet
	devices []watched
	timeout time.Duration
	out     chan<- gpu.Fault
	logf    func(string, ...any)
	stop    chan struct{}
	done    chan struct{}
}

// startEvents creates an event set, registers every watched GPU's parent
// for the fault events it supports, and starts waiting on it. It returns
// nil when no GPU could be registered: there is nothing to wait for.
func startEvents(lib Library, devices []watched, timeout time.Duration, out chan<- gpu.Fault, logf func(string, ...any)) *events {
	set, ret := lib.EventSetCreate()
	if ret != gonvml.SUCCESS {
		logf("GPU fault events are off: creating an NVML event set: %v", ret)
		return nil
	}
	registered := 0
	seen := map[string]bool{}
	for _, d := range devices {
		if seen[d.parent] {
			continue
		}
		seen[d.parent] = true
		if err := register(lib, d.parent, set); err != nil {
			logf("GPU fault events for GPU %s are off: %v", d.parent, err)
			continue
		}
		registered++
	}
	if registered == 0 {
		set.Free()
		return nil
	}
	e := &events{set: set, devices: devices, timeout: timeout, out: out, logf: logf,
		stop: make(chan struct{}), done: make(chan struct{})}
	go e.run()
	return e
}

// register adds GPU uuid's supported fault events to set.
func register(lib Library, uuid string, set gonvml.EventSet) error {
	h, ret := lib.DeviceGetHandleByUUID(uuid)
	if ret != gonvml.SUCCESS {
		return fmt.Errorf("looking it up: %w", ret)
	}
	supported, ret := h.GetSupportedEventTypes()
	if ret != gonvml.SUCCESS {
		return fmt.Errorf("reading its supported event types: %w", ret)
	}
	mask := faultEvents & supported
	if mask == 0 {
		return fmt.Errorf("it supports neither Xid nor ECC events (supported: %s)", eventNames(supported))
	}
	if ret := h.RegisterEvents(mask, set); ret != gonvml.SUCCESS {
		return fmt.Errorf("registering %s: %w", eventNames(mask), ret)
	}
	return nil
}

// eventNames names the fault event types in mask, for the log.
func eventNames(mask uint64) string {
	var names []string
	if mask&gonvml.EventTypeXidCriticalError != 0 {
		names = append(names, "XidCriticalError")
	}
	if mask&gonvml.EventTypeDoubleBitEccError != 0 {
		names = append(names, "DoubleBitEccError")
	}
	if len(names) == 0 {
		return fmt.Sprintf("%#x", mask)
	}
	return strings.Join(names, "|")
}

// run waits for events until stopped. ERROR_TIMEOUT means nothing
// happened; any other failure waits one timeout before the next try, so
// a set that fails at once cannot spin.
func (e *events) run() {
	defer close(e.done)
	defer e.set.Free()
	ms := uint32(e.timeout / time.Millisecond)
	var lastErr gonvml.Return = gonvml.SUCCESS
	for {
		select {
		case <-e.stop:
			return
		default:
		}
		data, ret := e.set.Wait(ms)
		switch ret {
		case gonvml.SUCCESS:
			lastErr = gonvml.SUCCESS
			if !e.deliver(data) {
				return
			}
			continue
		case gonvml.ERROR_TIMEOUT:
			lastErr = gonvml.SUCCESS
			continue
		}
		if ret != lastErr {
			lastErr = ret
			e.logf("waiting for GPU fault events: %v (trying again every %s)", ret, e.timeout)
		}
		select {
		case <-e.stop:
			return
		case <-time.After(e.timeout):
		}
	}
}

// deliver sends the faults an event stands for; false when stopped. NVML
// reports events per whole GPU, so one goes to every watched device on
// that GPU, unless it names the MIG instance (as it does for privileged
// callers). An event whose GPU cannot be told goes to every device, as
// NVIDIA's device plugin does.
func (e *events) deliver(data gonvml.EventData) bool {
	var xid uint64
	switch data.EventType {
	case gonvml.EventTypeXidCriticalError:
		xid = data.EventData
	case gonvml.EventTypeDoubleBitEccError:
		xid = 48
	default:
		return true
	}
	uuid := ""
	if data.Device != nil {
		if u, ret := data.Device.GetUUID(); ret == gonvml.SUCCESS {
			uuid = u
		}
	}
	now := time.Now()
	for _, d := range e.devices {
		if uuid != "" && d.parent != uuid {
			continue
		}
		if d.gi >= 0 && data.GpuInstanceId != noInstance && data.ComputeInstanceId != noInstance &&
			(uint32(d.gi) != data.GpuInstanceId || uint32(d.ci) != data.ComputeInstanceId) {
			continue
		}
		select {
		case e.out <- gpu.Fault{UUID: d.uuid, Index: d.index, Xid: xid, Time: now}:
		case <-e.stop:
			return false
		}
	}
	return true
}

// close tells the goroutine to stop and reports whether it has ended. It
// does not wait for a Wait in flight: that returns within the timeout, or
// never if the driver hangs, and the goroutine then ends and frees the set.
func (e *events) close() bool {
	close(e.stop)
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}
