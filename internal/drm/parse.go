package drm

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// parseUint reads a sysfs number attribute ("%llu\n").
func parseUint(b []byte) (uint64, error) {
	s := string(bytes.TrimSpace(b))
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("want a number, got %q", s)
	}
	return n, nil
}

// uuidOf is a device's UUID as ROCm writes it: "GPU-" and the 64-bit
// unique id in 16 upper-case hex digits. A zero id (no unique id) gives "".
func uuidOf(id uint64) string {
	if id == 0 {
		return ""
	}
	return fmt.Sprintf("GPU-%016X", id)
}

// parseUniqueID reads amdgpu's unique_id attribute ("%016llx\n", GFX9 and
// newer) and returns the device's UUID, "" when there is none.
func parseUniqueID(b []byte) string {
	n, err := strconv.ParseUint(string(bytes.TrimSpace(b)), 16, 64)
	if err != nil {
		return ""
	}
	return uuidOf(n)
}

// uevent is what a PCI device's uevent file says about it.
type uevent struct {
	driver string // DRIVER=amdgpu
	slot   string // PCI_SLOT_NAME=0000:03:00.0
	id     string // PCI_ID=1002:74A1
}

// parseUevent reads KEY=VALUE lines.
func parseUevent(b []byte) uevent {
	var u uevent
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		switch k {
		case "DRIVER":
			u.driver = v
		case "PCI_SLOT_NAME":
			u.slot = strings.ToLower(v)
		case "PCI_ID":
			u.id = strings.ToLower(v)
		}
	}
	return u
}

// parseProperties reads a KFD topology properties file: "name value"
// lines of unsigned numbers, as libhsakmt reads them ("%s %llu").
func parseProperties(b []byte) map[string]uint64 {
	props := map[string]uint64{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		if n, err := strconv.ParseUint(f[1], 10, 64); err == nil {
			props[f[0]] = n
		}
	}
	return props
}

// kfdNode is one node of the KFD topology.
type kfdNode struct {
	gpuID    uint32 // 0 for a CPU node
	pci      string // the GPU's PCI address; "" for a CPU node
	uniqueID uint64
}

// parseNode reads a topology node's gpu_id and properties. A node whose
// simd_count is 0 is a CPU (ROCm skips those): gpu is false.
func parseNode(gpuID, properties []byte) (n kfdNode, gpu bool, err error) {
	props := parseProperties(properties)
	if props["simd_count"] == 0 {
		return kfdNode{}, false, nil
	}
	id, err := parseUint(gpuID)
	if err != nil || id > 0xFFFFFFFF {
		return kfdNode{}, false, fmt.Errorf("gpu_id: %v", err)
	}
	loc := props["location_id"] // PCI bus << 8 | devfn, as pci_dev_id() packs it
	n = kfdNode{
		gpuID:    uint32(id),
		pci:      fmt.Sprintf("%04x:%02x:%02x.%x", props["domain"], loc>>8&0xff, loc>>3&0x1f, loc&0x7),
		uniqueID: props["unique_id"],
	}
	return n, true, nil
}

// fdinfo is what one DRM file descriptor's fdinfo says: its client and
// the device-local memory it holds.
type fdinfo struct {
	driver string
	pdev   string
	client string // drm-client-id; "" when absent
	vram   uint64 // bytes in device-local regions
	hasMem bool   // a memory key for a device-local region was present
}

// parseFdinfo reads /proc/<pid>/fdinfo/<fd> of a DRM file. Device-local
// memory is the sum over the device's own regions (amdgpu "vram", xe
// "vram0".., i915 "local0"..) of drm-resident-<region>, else
// drm-total-<region>, else the legacy drm-memory-<region>: resident is
// what occupies the device now. Sizes carry an optional unit (KiB, MiB,
// GiB); a line that does not parse is skipped. ok is false for a file
// without drm-driver (not a DRM client).
func parseFdinfo(b []byte) (fi fdinfo, ok bool) {
	type region struct{ resident, total, legacy int64 }
	var regions map[string]*region
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte("\n"))
		k, v, found := bytes.Cut(line, []byte(":"))
		if !found || !bytes.HasPrefix(k, []byte("drm-")) {
			continue
		}
		key := string(k[len("drm-"):])
		v = bytes.TrimSpace(v)
		switch key {
		case "driver":
			fi.driver, ok = string(v), true
			continue
		case "pdev":
			fi.pdev = strings.ToLower(string(v))
			continue
		case "client-id":
			fi.client = string(v)
			continue
		}
		kind, name, found := strings.Cut(key, "-")
		if !found || !deviceLocal(name) {
			continue
		}
		size, err := parseSize(v)
		if err != nil {
			continue
		}
		if regions == nil {
			regions = map[string]*region{}
		}
		r := regions[name]
		if r == nil {
			r = &region{-1, -1, -1}
			regions[name] = r
		}
		switch kind {
		case "resident":
			r.resident = int64(size)
		case "total":
			r.total = int64(size)
		case "memory":
			r.legacy = int64(size)
		}
	}
	for _, r := range regions {
		for _, n := range []int64{r.resident, r.total, r.legacy} {
			if n >= 0 {
				fi.vram += uint64(n)
				fi.hasMem = true
				break
			}
		}
	}
	return fi, ok
}

// deviceLocal reports whether an fdinfo memory region is the device's own
// memory: amdgpu's "vram", xe's "vram0", "vram1".., i915's "local0"...
func deviceLocal(region string) bool {
	return region == "vram" || numbered(region, "vram") || numbered(region, "local")
}

func numbered(s, prefix string) bool {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok || rest == "" {
		return false
	}
	for _, c := range rest {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// parseSize reads "<n>", "<n> KiB", "<n> MiB" or "<n> GiB".
func parseSize(v []byte) (uint64, error) {
	num, unit, _ := bytes.Cut(bytes.TrimSpace(v), []byte(" "))
	n, err := strconv.ParseUint(string(num), 10, 64)
	if err != nil {
		return 0, err
	}
	var shift uint
	switch string(bytes.TrimSpace(unit)) {
	case "":
	case "KiB":
		shift = 10
	case "MiB":
		shift = 20
	case "GiB":
		shift = 30
	default:
		return 0, fmt.Errorf("unknown unit %q", unit)
	}
	if n > ^uint64(0)>>shift {
		return 0, fmt.Errorf("%s overflows", v)
	}
	return n << shift, nil
}
