package drm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Intel's drivers report device memory only through a query ioctl on the
// render node (include/uapi/drm/xe_drm.h, i915_drm.h). Both follow the
// same two-call pattern: ask with a zero size to learn the size, then ask
// again with a buffer of that size. The layouts below are the kernel's
// (little-endian on every architecture Go runs these drivers on).
const (
	drmIoctlBase    = 'd'
	drmCommandBase  = 0x40
	xeDeviceQuery   = 0x00 // DRM_XE_DEVICE_QUERY
	i915Query       = 0x39 // DRM_I915_QUERY
	xeQueryMemRegns = 1    // DRM_XE_DEVICE_QUERY_MEM_REGIONS
	i915QueryMemRgn = 4    // DRM_I915_QUERY_MEMORY_REGIONS

	memClassDevice = 1 // DRM_XE_MEM_REGION_CLASS_VRAM, I915_MEMORY_CLASS_DEVICE

	xeRegionSize   = 88 // struct drm_xe_mem_region
	xeRegionsHead  = 8  // struct drm_xe_query_mem_regions before mem_regions[]
	i915RegionSize = 88 // struct drm_i915_memory_region_info
	i915RegionHead = 16 // struct drm_i915_query_memory_regions before regions[]

	// maxQuerySize bounds what a driver may ask gpuguard to allocate.
	maxQuerySize = 1 << 20
)

// xeDeviceQueryArg is struct drm_xe_device_query (40 bytes).
type xeDeviceQueryArg struct {
	Extensions uint64
	Query      uint32
	Size       uint32
	Data       uint64
	Reserved   [2]uint64
}

// i915QueryItem is struct drm_i915_query_item (24 bytes).
type i915QueryItem struct {
	QueryID uint64
	Length  int32
	Flags   uint32
	DataPtr uint64
}

// i915QueryArg is struct drm_i915_query (16 bytes).
type i915QueryArg struct {
	NumItems uint32
	Flags    uint32
	ItemsPtr uint64
}

// The requests are the kernel's _IOWR('d', DRM_COMMAND_BASE + nr, arg):
// direction read|write (3) << 30 | size << 16 | 'd' << 8 | nr.
const (
	// ioctlXeDeviceQuery is DRM_IOCTL_XE_DEVICE_QUERY.
	ioctlXeDeviceQuery = 3<<30 | unsafe.Sizeof(xeDeviceQueryArg{})<<16 | drmIoctlBase<<8 | (drmCommandBase + xeDeviceQuery)
	// ioctlI915Query is DRM_IOCTL_I915_QUERY.
	ioctlI915Query = 3<<30 | unsafe.Sizeof(i915QueryArg{})<<16 | drmIoctlBase<<8 | (drmCommandBase + i915Query)
)

// vram is a GPU's device memory as its driver reports it.
type vram struct{ total, used uint64 }

// errNoDeviceMemory: the driver reports no device-local region (an
// integrated GPU, which allocates from system RAM).
var errNoDeviceMemory = errors.New("no device memory region (an integrated GPU shares system RAM)")

// parseXeRegions reads struct drm_xe_query_mem_regions: the sum of the
// VRAM regions' total_size and used.
func parseXeRegions(b []byte) (vram, error) {
	return parseRegions(b, xeRegionsHead, xeRegionSize, func(r []byte, v *vram) {
		v.total += binary.LittleEndian.Uint64(r[8:])
		v.used += binary.LittleEndian.Uint64(r[16:])
	})
}

// parseI915Regions reads struct drm_i915_query_memory_regions: the sum of
// the device regions' probed_size and of probed_size - unallocated_size.
func parseI915Regions(b []byte) (vram, error) {
	return parseRegions(b, i915RegionHead, i915RegionSize, func(r []byte, v *vram) {
		probed, free := binary.LittleEndian.Uint64(r[8:]), binary.LittleEndian.Uint64(r[16:])
		v.total += probed
		if free < probed {
			v.used += probed - free
		}
	})
}

// parseRegions walks a count (u32 at 0), then regions of size bytes from
// head on, each starting with its memory class (u16), and adds the device
// regions up.
func parseRegions(b []byte, head, size int, add func(region []byte, v *vram)) (vram, error) {
	if len(b) < 4 {
		return vram{}, fmt.Errorf("memory regions: %d bytes, want at least 4", len(b))
	}
	n := int(binary.LittleEndian.Uint32(b))
	if n > (len(b)-head)/size || len(b) < head {
		return vram{}, fmt.Errorf("memory regions: %d regions do not fit in %d bytes", n, len(b))
	}
	var v vram
	found := false
	for i := range n {
		r := b[head+i*size : head+(i+1)*size]
		if binary.LittleEndian.Uint16(r) == memClassDevice {
			add(r, &v)
			found = true
		}
	}
	if !found {
		return vram{}, errNoDeviceMemory
	}
	return v, nil
}

// queryXe runs DRM_XE_DEVICE_QUERY_MEM_REGIONS on fd.
func queryXe(fd int) ([]byte, error) {
	q := xeDeviceQueryArg{Query: xeQueryMemRegns}
	if err := ioctl(fd, ioctlXeDeviceQuery, unsafe.Pointer(&q)); err != nil {
		return nil, err
	}
	if q.Size == 0 || q.Size > maxQuerySize {
		return nil, fmt.Errorf("the driver asks for a %d-byte buffer", q.Size)
	}
	buf := make([]byte, q.Size)
	var pin runtime.Pinner
	pin.Pin(&buf[0])
	defer pin.Unpin()
	q.Data = uint64(uintptr(unsafe.Pointer(&buf[0])))
	if err := ioctl(fd, ioctlXeDeviceQuery, unsafe.Pointer(&q)); err != nil {
		return nil, err
	}
	return buf, nil
}

// queryI915 runs DRM_I915_QUERY_MEMORY_REGIONS on fd.
func queryI915(fd int) ([]byte, error) {
	item := i915QueryItem{QueryID: i915QueryMemRgn}
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(&item)
	q := i915QueryArg{NumItems: 1, ItemsPtr: uint64(uintptr(unsafe.Pointer(&item)))}
	if err := ioctl(fd, ioctlI915Query, unsafe.Pointer(&q)); err != nil {
		return nil, err
	}
	if item.Length < 0 { // the item's own error, as -errno
		return nil, unix.Errno(-item.Length)
	}
	if item.Length == 0 || item.Length > maxQuerySize {
		return nil, fmt.Errorf("the driver asks for a %d-byte buffer", item.Length)
	}
	buf := make([]byte, item.Length)
	pin.Pin(&buf[0])
	item.DataPtr = uint64(uintptr(unsafe.Pointer(&buf[0])))
	if err := ioctl(fd, ioctlI915Query, unsafe.Pointer(&q)); err != nil {
		return nil, err
	}
	if item.Length < 0 {
		return nil, unix.Errno(-item.Length)
	}
	return buf, nil
}

// ioctl calls ioctl(2), retrying on EINTR and EAGAIN as libdrm does.
func ioctl(fd int, req uintptr, arg unsafe.Pointer) error {
	for {
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(arg))
		if errno == unix.EINTR || errno == unix.EAGAIN {
			continue
		}
		if errno != 0 {
			return errno
		}
		return nil
	}
}
