//go:build cgo

package nvml

import (
	"fmt"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// h200Name and h200Total are what go-nvml's mock/dgxh200 reports.
const (
	h200Name  = "NVIDIA H200 141GB HBM3e"
	h200Total = 144384 << 20
)

// fakeServer is an 8 x H200 NVML built like go-nvml's mock/dgxh200 server
// (mock.Interface with its function fields set), with deterministic UUIDs.
// dgxh200 itself imports github.com/google/uuid, which this module's
// go.sum does not list yet; with it there, newH200 can return
// dgxh200.New() and set the same function fields on its devices.
type fakeServer struct {
	mock.Interface
	mock.ExtendedInterface
	Devices []*fakeDevice
}

// fakeDevice is one GPU; tests replace its *Func fields to inject faults.
type fakeDevice struct {
	mock.Device
	UUID       string
	Index      int
	MemoryInfo gonvml.Memory // what v1 and (with Reserved 0) v2 report
	Procs      []gonvml.ProcessInfo
}

func newH200() *fakeServer {
	s := &fakeServer{}
	for i := range 8 {
		s.Devices = append(s.Devices, newFakeDevice(i))
	}
	s.ExtensionsFunc = func() gonvml.ExtendedInterface { return s }
	s.LookupSymbolFunc = func(string) error { return nil }
	s.InitFunc = func() gonvml.Return { return gonvml.SUCCESS }
	s.ShutdownFunc = func() gonvml.Return { return gonvml.SUCCESS }
	s.DeviceGetCountFunc = func() (int, gonvml.Return) { return len(s.Devices), gonvml.SUCCESS }
	s.DeviceGetHandleByIndexFunc = func(i int) (gonvml.Device, gonvml.Return) {
		if i < 0 || i >= len(s.Devices) {
			return nil, gonvml.ERROR_INVALID_ARGUMENT
		}
		return s.Devices[i], gonvml.SUCCESS
	}
	s.DeviceGetHandleByUUIDFunc = func(uuid string) (gonvml.Device, gonvml.Return) {
		for _, d := range s.Devices {
			if d.UUID == uuid {
				return d, gonvml.SUCCESS
			}
		}
		return nil, gonvml.ERROR_INVALID_ARGUMENT
	}
	return s
}

func newFakeDevice(i int) *fakeDevice {
	d := &fakeDevice{
		UUID:       fmt.Sprintf("GPU-%08x-1111-2222-3333-%012x", 0xabc0+i, i),
		Index:      i,
		MemoryInfo: gonvml.Memory{Total: h200Total, Free: h200Total},
	}
	d.GetIndexFunc = func() (int, gonvml.Return) { return d.Index, gonvml.SUCCESS }
	d.GetUUIDFunc = func() (string, gonvml.Return) { return d.UUID, gonvml.SUCCESS }
	d.GetNameFunc = func() (string, gonvml.Return) { return h200Name, gonvml.SUCCESS }
	d.GetMemoryInfoFunc = func() (gonvml.Memory, gonvml.Return) { return d.MemoryInfo, gonvml.SUCCESS }
	d.GetMemoryInfo_v2Func = func() (gonvml.Memory_v2, gonvml.Return) {
		m := d.MemoryInfo
		return gonvml.Memory_v2{Total: m.Total, Free: m.Free, Used: m.Used}, gonvml.SUCCESS
	}
	d.GetComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) {
		return d.Procs, gonvml.SUCCESS
	}
	return d
}

// setUsed sets the device's used memory.
func (d *fakeDevice) setUsed(used uint64) {
	d.MemoryInfo.Used = used
	d.MemoryInfo.Free = d.MemoryInfo.Total - used
}

// addProc adds a compute process and its usage to the device.
func (d *fakeDevice) addProc(pid uint32, used uint64) {
	d.Procs = append(d.Procs, gonvml.ProcessInfo{Pid: pid, UsedGpuMemory: used})
	d.setUsed(d.MemoryInfo.Used + used)
}

func (s *fakeServer) uuids() []string {
	var out []string
	for _, d := range s.Devices {
		out = append(out, d.UUID)
	}
	return out
}
