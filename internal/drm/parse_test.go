package drm

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func readTestdata(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", path))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const (
	kib = uint64(1 << 10)
	mib = uint64(1 << 20)
)

// TestParseFdinfo reads the fdinfo of each driver as the kernel prints it
// (Documentation/gpu/drm-usage-stats.rst): device-local memory only,
// resident before total before the legacy key, units parsed.
func TestParseFdinfo(t *testing.T) {
	for _, tt := range []struct {
		file string
		want fdinfo
		ok   bool
	}{
		// amdgpu: vram region; resident (KiB) wins over total and drm-memory-vram.
		{"amdgpu", fdinfo{driver: "amdgpu", pdev: "0000:85:00.0", client: "19", vram: 12582912 * kib, hasMem: true}, true},
		// Kernels before the common keys print only drm-memory-vram.
		{"amdgpu-legacy", fdinfo{driver: "amdgpu", pdev: "0000:04:00.0", client: "4", vram: 44564 * kib, hasMem: true}, true},
		// xe: vram0 and vram1 (MiB and KiB), not gtt, system or stolen.
		{"xe", fdinfo{driver: "xe", pdev: "0000:03:00.0", client: "7", vram: 24*mib + 1024*kib, hasMem: true}, true},
		// i915 integrated: system memory only, no device-local region.
		{"i915-integrated", fdinfo{driver: "i915", pdev: "0000:00:02.0", client: "5"}, true},
		// No unit: bytes.
		{"bytes", fdinfo{driver: "amdgpu", pdev: "0000:85:00.0", client: "21", vram: 2048, hasMem: true}, true},
		{"not-drm", fdinfo{}, false},
	} {
		got, ok := parseFdinfo(readTestdata(t, "fdinfo/"+tt.file))
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: got %+v %v, want %+v %v", tt.file, got, ok, tt.want, tt.ok)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]uint64{
		"0": 0, "4096": 4096, "44564 KiB": 44564 * kib, "24 MiB": 24 * mib, "2 GiB": 2 << 30, " 7 KiB ": 7 * kib,
	} {
		if got, err := parseSize([]byte(in)); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "KiB", "12 kB", "-1", "1.5 MiB", "18446744073709551615 KiB"} {
		if got, err := parseSize([]byte(in)); err == nil {
			t.Errorf("parseSize(%q) = %d, want an error", in, got)
		}
	}
}

func TestParseUevent(t *testing.T) {
	got := parseUevent(readTestdata(t, "sysfs/class/drm/card0/device/uevent"))
	if want := (uevent{driver: "amdgpu", slot: "0000:85:00.0", id: "1002:74a1"}); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if got := parseUevent([]byte("garbage\n=\n")); got != (uevent{}) {
		t.Errorf("garbage: %+v", got)
	}
}

// TestParseUniqueID: amdgpu prints %016llx; ROCm's UUID is GPU- and 16
// upper-case hex digits.
func TestParseUniqueID(t *testing.T) {
	for in, want := range map[string]string{
		"5b3edde6585fcf08\n": "GPU-5B3EDDE6585FCF08",
		"00000000000000ab\n": "GPU-00000000000000AB",
		"0000000000000000\n": "",
		"\n":                 "",
		"zz":                 "",
	} {
		if got := parseUniqueID([]byte(in)); got != want {
			t.Errorf("parseUniqueID(%q) = %q, want %q", in, got, want)
		}
	}
	if got := parseUniqueID(readTestdata(t, "sysfs/class/drm/card0/device/unique_id")); got != "GPU-5B3EDDE6585FCF08" {
		t.Errorf("testdata unique_id: %q", got)
	}
}

func TestParseUint(t *testing.T) {
	if n, err := parseUint(readTestdata(t, "sysfs/class/drm/card0/device/mem_info_vram_total")); err != nil || n != 206141652992 {
		t.Errorf("mem_info_vram_total: %d %v", n, err)
	}
	for _, in := range []string{"", "-5\n", "12 KiB"} {
		if _, err := parseUint([]byte(in)); err == nil {
			t.Errorf("parseUint(%q) succeeded", in)
		}
	}
}

// TestParseNode reads KFD topology nodes: a CPU (simd_count 0) is not a
// GPU; a GPU's PCI address comes from domain and location_id (bus << 8 |
// devfn), its unique id from unique_id.
func TestParseNode(t *testing.T) {
	node := func(n string) ([]byte, []byte) {
		return readTestdata(t, "sysfs/class/kfd/kfd/topology/nodes/"+n+"/gpu_id"),
			readTestdata(t, "sysfs/class/kfd/kfd/topology/nodes/"+n+"/properties")
	}
	if _, gpu, err := parseNode(node("0")); gpu || err != nil {
		t.Errorf("node 0 (a CPU): gpu %v, err %v", gpu, err)
	}
	got, gpu, err := parseNode(node("1"))
	want := kfdNode{gpuID: 54321, pci: "0000:85:00.0", uniqueID: 6574936487402393352}
	if !gpu || err != nil || got != want {
		t.Errorf("node 1: %+v %v %v, want %+v", got, gpu, err, want)
	}
	got, _, _ = parseNode(node("2"))
	if want := (kfdNode{gpuID: 12345, pci: "0000:15:00.0"}); got != want {
		t.Errorf("node 2: %+v, want %+v", got, want)
	}
	got, _, _ = parseNode([]byte("7\n"), []byte("simd_count 4\ndomain 1\nlocation_id 49417\n"))
	if got.pci != "0001:c1:01.1" {
		t.Errorf("domain 1, bus c1, slot 1, function 1: %q", got.pci)
	}
	if _, _, err := parseNode([]byte("x\n"), []byte("simd_count 4\n")); err == nil {
		t.Error("a GPU node with a bad gpu_id parsed")
	}
}

func TestParseProperties(t *testing.T) {
	got := parseProperties([]byte("simd_count 304\nbad line here\nname gfx942\nunique_id 18446744073709551615\n"))
	want := map[string]uint64{"simd_count": 304, "unique_id": 18446744073709551615}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestVisibleDevices(t *testing.T) {
	for _, tt := range []struct {
		rocr, hip string
		want      []string
		err       bool
	}{
		{"", "", nil, false},
		{"1,0", "", []string{"1", "0"}, false},
		{"", "2", []string{"2"}, false},
		{"GPU-5B3E,3,1", "2,0", []string{"1", "GPU-5B3E"}, false}, // HIP indexes what ROCR left
		{"0,1", "2", nil, true},
		{"0,1", "x", nil, true},
		{"0,,1", "", nil, true},
	} {
		got, err := VisibleDevices(tt.rocr, tt.hip)
		if !reflect.DeepEqual(got, tt.want) || (err != nil) != tt.err {
			t.Errorf("ROCR=%q HIP=%q: %q %v, want %q (error %v)", tt.rocr, tt.hip, got, err, tt.want, tt.err)
		}
	}
}
