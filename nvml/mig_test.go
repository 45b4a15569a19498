//go:build cgo

package nvml

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/gpuguard/gpuguard/gpu"
)

// go-nvml's mock servers know MIG profiles but implement none of the MIG
// device calls (GetMaxMigDeviceCount, GetMigDeviceHandleByIndex, the
// instance ids, ...): calling one panics "method is nil". migSplit fills
// them in on a mock device, the way a real H200 split into instances
// answers.

// migSlot is one MIG instance to create: its NVML MIG device index (slots
// left out answer ERROR_NOT_FOUND), ids, profile name and memory.
type migSlot struct {
	slot, gi, ci int
	profile      string
	total, used  uint64
}

// migSplit enables MIG on GPU i of srv with the given instances and
// returns them. The parent's own memory query reports a large aggregate,
// so a test can tell the instance's figures from the parent's.
func migSplit(srv *server.Server, i int, slots ...migSlot) []*server.Device {
	parent := dev(srv, i)
	parent.MigMode = gonvml.DEVICE_MIG_ENABLE
	setUsed(parent, 100<<30)
	const maxSlots = 7
	handles := make([]gonvml.Device, maxSlots)
	var out []*server.Device
	for _, s := range slots {
		m := server.NewDeviceFromConfig(gpus.Config{Name: parent.Config.Name + " MIG " + s.profile}, s.slot)
		m.UUID = fmt.Sprintf("MIG-%08x-%04x-4000-8000-000000000000", i, s.slot)
		m.MemoryInfo = gonvml.Memory{Total: s.total, Used: s.used, Free: s.total - s.used}
		mockQueries(m)
		gi, ci := s.gi, s.ci
		m.GetGpuInstanceIdFunc = func() (int, gonvml.Return) { return gi, gonvml.SUCCESS }
		m.GetComputeInstanceIdFunc = func() (int, gonvml.Return) { return ci, gonvml.SUCCESS }
		m.GetDeviceHandleFromMigDeviceHandleFunc = func() (gonvml.Device, gonvml.Return) { return parent, gonvml.SUCCESS }
		m.IsMigDeviceHandleFunc = func() (bool, gonvml.Return) { return true, gonvml.SUCCESS }
		handles[s.slot] = m
		out = append(out, m)
	}
	parent.GetMaxMigDeviceCountFunc = func() (int, gonvml.Return) { return maxSlots, gonvml.SUCCESS }
	parent.GetMigDeviceHandleByIndexFunc = func(j int) (gonvml.Device, gonvml.Return) {
		if j < 0 || j >= maxSlots {
			return nil, gonvml.ERROR_INVALID_ARGUMENT
		}
		if handles[j] == nil {
			return nil, gonvml.ERROR_NOT_FOUND
		}
		return handles[j], gonvml.SUCCESS
	}
	// nvmlDeviceGetHandleByUUID takes MIG UUIDs too.
	byUUID := srv.DeviceGetHandleByUUIDFunc
	srv.DeviceGetHandleByUUIDFunc = func(uuid string) (gonvml.Device, gonvml.Return) {
		for _, m := range out {
			if m.UUID == uuid {
				return m, gonvml.SUCCESS
			}
		}
		return byUUID(uuid)
	}
	return out
}

// h200Split is a mock DGX H200 whose GPU 1 is split into a 3g.71gb
// instance in slot 0 and a 1g.18gb one in slot 2 (slot 1 empty).
func h200Split() (*server.Server, []*server.Device) {
	srv := newH200()
	migs := migSplit(srv, 1,
		migSlot{slot: 0, gi: 2, ci: 0, profile: "3g.71gb", total: 71 << 30, used: 10 << 30},
		migSlot{slot: 2, gi: 9, ci: 0, profile: "1g.18gb", total: 18 << 30, used: 3 << 30})
	return srv, migs
}

// TestMIGInstanceMemory: a MIG instance is watched on its own handle: its
// UUID, name and memory, never the parent GPU's aggregate.
func TestMIGInstanceMemory(t *testing.T) {
	srv, migs := h200Split()
	p := mustOpen(t, Options{Lib: srv, Devices: []string{migs[1].UUID}})
	got := mustSample(t, p).Devices
	want := []gpu.Device{{Index: 9, UUID: migs[1].UUID, Name: "NVIDIA H200 141GB HBM3e MIG 1g.18gb", Used: 3 << 30, Total: 18 << 30}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if n := len(dev(srv, 1).GetMemoryInfo_v2Calls()); n != 0 {
		t.Errorf("the parent GPU's memory was read %d times", n)
	}
}

// TestMIGAll: "all" lists the whole GPUs without MIG and, in place of a GPU
// with MIG enabled, its instances (indexed after the whole GPUs).
func TestMIGAll(t *testing.T) {
	srv, migs := h200Split()
	p := mustOpen(t, Options{Lib: srv})
	var got []string
	for _, d := range mustSample(t, p).Devices {
		got = append(got, fmt.Sprintf("%d %s %d", d.Index, d.UUID, d.Total>>30))
	}
	u := uuids(srv)
	want := []string{"0 " + u[0] + " 141", "8 " + migs[0].UUID + " 71", "9 " + migs[1].UUID + " 18"}
	for i := 2; i < 8; i++ {
		want = append(want, fmt.Sprintf("%d %s 141", i, u[i]))
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestMIGProcesses: an instance's processes come from its own handle and
// are attributed to its own index.
func TestMIGProcesses(t *testing.T) {
	srv, migs := h200Split()
	setProcs(dev(srv, 1), gonvml.ProcessInfo{Pid: 1, UsedGpuMemory: 99 << 30}) // the aggregate a root caller sees
	setProcs(migs[0], gonvml.ProcessInfo{Pid: 4100, UsedGpuMemory: 8 << 30})
	setProcs(migs[1], gonvml.ProcessInfo{Pid: 4200, UsedGpuMemory: 2 << 30})
	p := mustOpen(t, Options{Lib: srv, Devices: []string{migs[0].UUID, migs[1].UUID}})
	s := mustSample(t, p)
	want := []gpu.Process{{PID: 4100, Device: 8, Used: 8 << 30}, {PID: 4200, Device: 9, Used: 2 << 30}}
	if !reflect.DeepEqual(s.Processes, want) || s.ProcessesAt.IsZero() {
		t.Errorf("processes %+v at %v, want %+v", s.Processes, s.ProcessesAt, want)
	}
}

// TestMIGInCUDAVisibleDevices: CUDA_VISIBLE_DEVICES as a MIG-enabled pod
// gets it (one MIG UUID), the old MIG-GPU-<uuid>/<gi>/<ci> form, a unique
// prefix, and the instance's index all name the instance.
func TestMIGInCUDAVisibleDevices(t *testing.T) {
	srv, migs := h200Split()
	u := uuids(srv)
	for _, env := range []string{
		migs[0].UUID,
		"MIG-GPU-" + strings.TrimPrefix(u[1], "GPU-") + "/2/0",
		"MIG-00000001-0000", // a prefix of slot 0 only
		"8",
	} {
		sel, err := gpu.ParseDeviceList(env)
		if err != nil {
			t.Fatal(err)
		}
		p := mustOpen(t, Options{Lib: srv, Devices: sel})
		if d := mustSample(t, p).Devices; len(d) != 1 || d[0].UUID != migs[0].UUID || d[0].Total != 71<<30 {
			t.Errorf("CUDA_VISIBLE_DEVICES=%s: %+v, want the 3g.71gb instance", env, d)
		}
	}
}

func TestMIGSelectErrors(t *testing.T) {
	srv, migs := h200Split()
	u := uuids(srv)
	for _, tc := range []struct{ sel, want string }{
		{"MIG-ffffffff", "no MIG instance has this UUID"},
		{"MIG-00000001", "ambiguous"},
		{"MIG-GPU-" + strings.TrimPrefix(u[1], "GPU-") + "/1/0", "no MIG instance 1/0"},
		{"MIG-GPU-x/y/z", "want MIG-GPU-<uuid>"},
		{"10", "MIG instances 8-9"},
		{migs[0].UUID + "," + "8", "listed twice"},
	} {
		sel, _ := gpu.ParseDeviceList(tc.sel)
		_, err := Open(Options{Lib: srv, Devices: sel})
		if err == nil || errors.Is(err, gpu.ErrUnavailable) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("select %q: error %v, want one saying %q", tc.sel, err, tc.want)
		}
	}
}

// TestMIGLostAndBack: a MIG instance that stops answering is looked up
// again by its MIG UUID, as a whole GPU is.
func TestMIGLostAndBack(t *testing.T) {
	srv, migs := h200Split()
	f := inject(migs[0])
	p := mustOpen(t, Options{Lib: srv, Devices: []string{migs[0].UUID}})
	f.set(gonvml.ERROR_GPU_IS_LOST, nil)
	if _, err := p.Sample(t.Context()); !errors.Is(err, gpu.ErrGPULost) {
		t.Fatalf("lost instance: %v", err)
	}
	f.set(gonvml.SUCCESS, nil)
	if d := mustSample(t, p).Devices; d[0].UUID != migs[0].UUID {
		t.Errorf("after it came back: %+v", d)
	}
}
