//go:build cgo

package nvml

import (
	"strings"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// The tests run on go-nvml's own fake server, mock/dgxh200: 8 x H200 with
// the names, totals and (random) UUIDs the mock assigns. Faults are
// injected by replacing the mock's *Func fields, and calls are counted
// with its *Calls methods. Nothing here needs a hand-written fake.

// newH200 is dgxh200.New() with the two queries the probe makes and the
// mock leaves nil filled in on every device (see mockQueries).
func newH200() *server.Server {
	srv := dgxh200.New()
	for i := range srv.Devices {
		mockQueries(dev(srv, i))
	}
	return srv
}

// mockQueries sets the queries mock/server leaves nil, which would panic
// when called: GetMemoryInfo_v2 reports d.MemoryInfo (the field the mock's
// own GetMemoryInfo returns) with nothing reserved, and
// GetComputeRunningProcesses reports no process until setProcs.
func mockQueries(d *server.Device) *server.Device {
	d.GetMemoryInfo_v2Func = func() (gonvml.Memory_v2, gonvml.Return) {
		m := d.MemoryInfo
		return gonvml.Memory_v2{Total: m.Total, Free: m.Free, Used: m.Used}, gonvml.SUCCESS
	}
	setProcs(d)
	return d
}

// dev is the mock's device i.
func dev(srv *server.Server, i int) *server.Device {
	return srv.Devices[i].(*server.Device)
}

// setUsed sets a device's used memory in its MemoryInfo.
func setUsed(d *server.Device, used uint64) {
	d.MemoryInfo.Used = used
	d.MemoryInfo.Free = d.MemoryInfo.Total - used
}

// setProcs overrides GetComputeRunningProcessesFunc: the device runs procs.
func setProcs(d *server.Device, procs ...gonvml.ProcessInfo) {
	procs = append([]gonvml.ProcessInfo(nil), procs...)
	d.GetComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) {
		return procs, gonvml.SUCCESS
	}
}

func uuids(srv *server.Server) []string {
	var out []string
	for i := range srv.Devices {
		out = append(out, dev(srv, i).UUID)
	}
	return out
}

// uniquePrefix is the shortest prefix of u[i] past "GPU-" that no other
// UUID in u starts with (the mock's UUIDs are random).
func uniquePrefix(u []string, i int) string {
	for n := len("GPU-") + 1; n < len(u[i]); n++ {
		p, clash := u[i][:n], false
		for j := range u {
			clash = clash || (j != i && strings.HasPrefix(u[j], p))
		}
		if !clash {
			return p
		}
	}
	return u[i]
}

// absentPrefix is a UUID prefix no GPU in u has: its first hex digit
// starts none of them (8 GPUs cannot use all 16).
func absentPrefix(u []string) string {
	for _, c := range "0123456789abcdef" {
		p := "GPU-" + string(c)
		clash := false
		for _, s := range u {
			clash = clash || strings.HasPrefix(s, p)
		}
		if !clash {
			return p + "0ffffff"
		}
	}
	panic("more than 16 GPUs")
}
