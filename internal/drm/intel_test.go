package drm

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gpuguard/gpuguard/gpu"
)

// procWithCaps writes a procfs whose self/status has CapEff capEff.
func procWithCaps(t *testing.T, capEff string) string {
	t.Helper()
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "self"), 0o755)
	status := "Name:\tgpuguard\nCapInh:\t0000000000000000\nCapPrm:\t" + capEff + "\nCapEff:\t" + capEff + "\n"
	if err := os.WriteFile(filepath.Join(dir, "self", "status"), []byte(status), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The ioctl requests and argument layouts are the kernel's: a wrong size
// is a different request number, which the driver refuses (or worse).
func TestIntelIoctlLayouts(t *testing.T) {
	if got := unsafe.Sizeof(xeDeviceQueryArg{}); got != 40 {
		t.Errorf("struct drm_xe_device_query: %d bytes, want 40", got)
	}
	if got := unsafe.Sizeof(i915QueryArg{}); got != 16 {
		t.Errorf("struct drm_i915_query: %d bytes, want 16", got)
	}
	if got := unsafe.Sizeof(i915QueryItem{}); got != 24 {
		t.Errorf("struct drm_i915_query_item: %d bytes, want 24", got)
	}
	for _, l := range []struct {
		name      string
		got, want int
	}{
		{"struct drm_xe_query_mem_regions head", binary.Size(xeMemRegions{}), xeRegionsHead},
		{"struct drm_xe_mem_region", binary.Size(xeMemRegion{}), xeRegionSize},
		{"struct drm_i915_query_memory_regions head", binary.Size(i915MemoryRegions{}), i915RegionHead},
		{"struct drm_i915_memory_region_info", binary.Size(i915MemoryRegionInfo{}), i915RegionSize},
	} {
		if l.got != l.want {
			t.Errorf("%s: %d bytes by the header, the parser steps %d", l.name, l.got, l.want)
		}
	}
	// DRM_IOWR(0x40, struct drm_xe_device_query), DRM_IOWR(0x79, struct drm_i915_query).
	if ioctlXeDeviceQuery != 0xc0286440 {
		t.Errorf("DRM_IOCTL_XE_DEVICE_QUERY = %#x, want 0xc0286440", uintptr(ioctlXeDeviceQuery))
	}
	if ioctlI915Query != 0xc0106479 {
		t.Errorf("DRM_IOCTL_I915_QUERY = %#x, want 0xc0106479", uintptr(ioctlI915Query))
	}
}

// region is one memory region to encode: class, then two sizes (xe:
// total_size, used; i915: probed_size, unallocated_size).
type region struct {
	class uint16
	a, b  uint64
}

// The kernel's structs, field by field as xe_drm.h and i915_drm.h declare
// them, so that the regions the parser is tested on are laid out by the
// headers, not by the parser's own offsets.
type (
	// xeMemRegions is struct drm_xe_query_mem_regions before mem_regions[].
	xeMemRegions struct{ NumMemRegions, Pad uint32 }
	// xeMemRegion is struct drm_xe_mem_region.
	xeMemRegion struct {
		MemClass, Instance             uint16
		MinPageSize                    uint32
		TotalSize, Used                uint64
		CPUVisibleSize, CPUVisibleUsed uint64
		Reserved                       [6]uint64
	}
	// i915MemoryRegions is struct drm_i915_query_memory_regions before
	// regions[].
	i915MemoryRegions struct {
		NumRegions uint32
		Rsvd       [3]uint32
	}
	// i915MemoryRegionInfo is struct drm_i915_memory_region_info.
	i915MemoryRegionInfo struct {
		MemoryClass, MemoryInstance uint16 // struct drm_i915_gem_memory_class_instance
		Rsvd0                       uint32
		ProbedSize, UnallocatedSize uint64
		Rsvd1                       [8]uint64
	}
)

// encode lays values out as the kernel does (little-endian, no padding:
// the structs above have none).
func encode(values ...any) []byte {
	var buf bytes.Buffer
	for _, v := range values {
		if err := binary.Write(&buf, binary.LittleEndian, v); err != nil {
			panic(err)
		}
	}
	return buf.Bytes()
}

// TestParseRegions: the memory regions as each driver lays them out; only
// the device regions count, and a buffer too short for its count is an
// error, not a read past its end.
func TestParseRegions(t *testing.T) {
	const gib = 1 << 30
	xe := func(rs ...region) []byte {
		v := []any{xeMemRegions{NumMemRegions: uint32(len(rs))}}
		for i, r := range rs {
			v = append(v, xeMemRegion{MemClass: r.class, Instance: uint16(i), TotalSize: r.a, Used: r.b})
		}
		return encode(v...)
	}
	i915 := func(rs ...region) []byte {
		v := []any{i915MemoryRegions{NumRegions: uint32(len(rs))}}
		for i, r := range rs {
			v = append(v, i915MemoryRegionInfo{MemoryClass: r.class, MemoryInstance: uint16(i), ProbedSize: r.a, UnallocatedSize: r.b})
		}
		return encode(v...)
	}
	for _, tt := range []struct {
		name  string
		parse func([]byte) (vram, error)
		b     []byte
		want  vram
		err   string
	}{
		// xe: total_size, used.
		{"xe dGPU: system memory, then VRAM", parseXeRegions, xe(region{0, 64 * gib, 0}, region{1, 16 * gib, 3 * gib}), vram{16 * gib, 3 * gib}, ""},
		{"xe two tiles: the VRAM regions add up", parseXeRegions, xe(region{0, 64 * gib, 0}, region{1, 24 * gib, 1 * gib}, region{1, 24 * gib, 2 * gib}), vram{48 * gib, 3 * gib}, ""},
		{"xe integrated: system memory only", parseXeRegions, xe(region{0, 32 * gib, 5 * gib}), vram{}, "no device memory"},
		{"xe truncated", parseXeRegions, xe(region{1, 16 * gib, 3 * gib})[:60], vram{}, "do not fit"},
		{"xe empty", parseXeRegions, nil, vram{}, "at least 4"},
		// i915: probed_size, unallocated_size; used is the difference.
		{"i915 dGPU", parseI915Regions, i915(region{0, 64 * gib, 64 * gib}, region{1, 16 * gib, 12 * gib}), vram{16 * gib, 4 * gib}, ""},
		{"i915 unallocated above probed: none used", parseI915Regions, i915(region{1, 16 * gib, 17 * gib}), vram{16 * gib, 0}, ""},
		{"i915 integrated", parseI915Regions, i915(region{0, 32 * gib, 30 * gib}), vram{}, "no device memory"},
		{"i915 count larger than the buffer", parseI915Regions, i915(region{1, 16 * gib, 0})[:100], vram{}, "do not fit"},
	} {
		got, err := tt.parse(tt.b)
		if got != tt.want || (err == nil) != (tt.err == "") || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("%s: %+v, %v; want %+v, %q", tt.name, got, err, tt.want, tt.err)
		}
	}
}

func TestSeesDeviceMemory(t *testing.T) {
	for capEff, want := range map[string]bool{
		"0000000000000000": false,
		"0000000000200000": true,  // CAP_SYS_ADMIN
		"0000004000000000": true,  // CAP_PERFMON
		"000001ffffffffff": true,  // root
		"00000000a80425fb": false, // docker's default set: neither
	} {
		got, err := seesDeviceMemory(procWithCaps(t, capEff))
		if err != nil || got != want {
			t.Errorf("CapEff %s: %v, %v; want %v", capEff, got, err, want)
		}
	}
	if _, err := seesDeviceMemory(procWithCaps(t, "zz")); err == nil {
		t.Error("a CapEff that is not hex: no error")
	}
	if _, err := seesDeviceMemory(t.TempDir()); err == nil {
		t.Error("no status file: no error")
	}
}

func TestInitialUserNS(t *testing.T) {
	for uidMap, want := range map[string]bool{
		"         0          0 4294967295\n": true,  // the host's
		"         0     100000      65536\n": false, // a rootless container
		"0 1000 1\n1 100000 65536\n":         false,
		"":                                   false, // being set up
		"garbage\n":                          true,  // as runc takes it
	} {
		if got := initialUserNS([]byte(uidMap)); got != want {
			t.Errorf("uid_map %q: %v, want %v", uidMap, got, want)
		}
	}
}

// fakeVRAM is a vramSource whose figures and errors the test sets.
type fakeVRAM struct {
	v      vram
	err    error
	closed bool
}

func (f *fakeVRAM) read() (vram, error) { return f.v, f.err }
func (f *fakeVRAM) Close() error        { f.closed = true; return nil }

// intelTree is the testdata tree plus a discrete xe GPU (card3, with a
// render node), and an opener that hands out the fakes by render node.
func intelTree(t *testing.T, fakes map[string]*fakeVRAM) (sysfs string, opener vramOpener, opened *[]string) {
	t.Helper()
	sys := copyTree(t, "sysfs")
	dev := filepath.Join(sys, "class/drm/card3/device")
	os.MkdirAll(filepath.Join(dev, "drm/renderD130"), 0o755)
	os.WriteFile(filepath.Join(dev, "uevent"), []byte("DRIVER=xe\nPCI_ID=8086:E20B\nPCI_SLOT_NAME=0000:03:00.0\n"), 0o644)
	var calls []string
	return sys, func(driver, node string) (vramSource, error) {
		calls = append(calls, driver+" "+node)
		f, ok := fakes[filepath.Base(node)]
		if !ok {
			return nil, &os.PathError{Op: "open", Path: node, Err: unix.ENOENT}
		}
		return f, nil
	}, &calls
}

// TestIntelWatched: with CAP_PERFMON, a discrete xe GPU is watched through
// its render node: total and used from the driver's query, in PCI order
// after the KFD topology's AMD GPUs. The integrated i915 (no device
// memory) is refused and its render node closed again.
func TestIntelWatched(t *testing.T) {
	const gib = 1 << 30
	xe := &fakeVRAM{v: vram{total: 16 * gib, used: 3 * gib}}
	igpu := &fakeVRAM{err: errNoDeviceMemory}
	sys, opener, opened := intelTree(t, map[string]*fakeVRAM{"renderD130": xe, "renderD129": igpu})
	p, err := Open(Options{Sysfs: sys, Procfs: procWithCaps(t, "0000004000000000"), Devfs: "/fakedev", openVRAM: opener})
	if err != nil {
		t.Fatal(err)
	}
	want := "xe /fakedev/dri/renderD130"
	if !strings.Contains(strings.Join(*opened, ","), want) {
		t.Errorf("opened %v, want %s among them", *opened, want)
	}
	if !igpu.closed {
		t.Error("the refused iGPU's render node was left open")
	}
	devs := sample(t, p).Devices
	if len(devs) != 3 {
		t.Fatalf("devices %+v, want the two AMD GPUs and the xe one", devs)
	}
	got := devs[2]
	if got.UUID != "0000:03:00.0" || got.Name != "Intel GPU (8086:e20b)" || got.Total != 16*gib || got.Used != 3*gib {
		t.Errorf("xe GPU %+v", got)
	}
	xe.v.used = 5 * gib
	if d := sample(t, p).Devices[2]; d.Used != 5*gib {
		t.Errorf("after a change: %+v", d)
	}
	// A GPU that falls off the bus: the driver answers ENODEV.
	xe.err = unix.ENODEV
	if _, err := p.Sample(context.Background()); !errors.Is(err, gpu.ErrGPULost) {
		t.Errorf("ENODEV: %v, want ErrGPULost", err)
	}
	xe.err = errors.New("EINVAL")
	if _, err := p.Sample(context.Background()); err == nil || errors.Is(err, gpu.ErrGPULost) {
		t.Errorf("another error: %v, want a plain error", err)
	}
	p.Close()
	if !xe.closed {
		t.Error("Close left the render node open")
	}
}

// TestIntelRefused: without CAP_PERFMON or CAP_SYS_ADMIN the driver's
// figures are not real (xe says 0 used), so no render node is opened and
// the GPU is refused, saying why; a selection that leaves an opened render
// node unwatched, or that fails, closes it.
func TestIntelRefused(t *testing.T) {
	xe := &fakeVRAM{v: vram{total: 16 << 30, used: 1 << 30}}
	sys, opener, opened := intelTree(t, map[string]*fakeVRAM{"renderD130": xe})
	_, err := Open(Options{Sysfs: sys, Procfs: procWithCaps(t, "00000000a80425fb"), Devices: []string{"0000:03:00.0"}, openVRAM: opener})
	if err == nil || !strings.Contains(err.Error(), "xe reports memory use only to CAP_PERFMON or CAP_SYS_ADMIN, and gpuguard has neither") {
		t.Errorf("no capability: %v", err)
	}
	if len(*opened) != 0 {
		t.Errorf("opened %v without the capability", *opened)
	}

	p, err := Open(Options{Sysfs: sys, Procfs: procWithCaps(t, "000001ffffffffff"), Devices: []string{"0"}, openVRAM: opener})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if !xe.closed {
		t.Error("the unselected xe GPU's render node was left open")
	}

	// Root in a user namespace of its own: CapEff has both, and they count
	// for nothing with the driver.
	userns := procWithCaps(t, "000001ffffffffff")
	if err := os.WriteFile(filepath.Join(userns, "self", "uid_map"), []byte("         0     100000      65536\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	*opened = nil
	_, err = Open(Options{Sysfs: sys, Procfs: userns, Devices: []string{"0000:03:00.0"}, openVRAM: opener})
	if err == nil || !strings.Contains(err.Error(), "xe reports memory use only to CAP_PERFMON or CAP_SYS_ADMIN, and gpuguard runs in a user namespace") {
		t.Errorf("in a user namespace: %v", err)
	}
	if len(*opened) != 0 {
		t.Errorf("opened %v in a user namespace", *opened)
	}

	// A selection that fails after the xe GPU was taken closes its node
	// too (the probe's, not the unselected ones').
	for _, sel := range [][]string{{"2", "0000:03:00.0"}, {"2", "9"}} {
		xe := &fakeVRAM{v: vram{total: 16 << 30, used: 1 << 30}}
		sys, opener, _ := intelTree(t, map[string]*fakeVRAM{"renderD130": xe})
		if _, err := Open(Options{Sysfs: sys, Procfs: procWithCaps(t, "000001ffffffffff"), Devices: sel, openVRAM: opener}); err == nil {
			t.Errorf("Devices %q: no error", sel)
		}
		if !xe.closed {
			t.Errorf("Devices %q: the selected xe GPU's render node was left open by the failed Open", sel)
		}
	}

	sys2, opener2, _ := intelTree(t, map[string]*fakeVRAM{}) // no device node
	_, err = Open(Options{Sysfs: sys2, Procfs: procWithCaps(t, "000001ffffffffff"), Devices: []string{"0000:03:00.0"}, openVRAM: opener2})
	if err == nil || !strings.Contains(err.Error(), "renderD130") {
		t.Errorf("no device node: %v", err)
	}
}
