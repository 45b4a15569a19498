// Package drm is the AMD (and, for detection, Intel) backend: a gpu.Probe
// over the Linux kernel's DRM counters, with no vendor library.
//
// Device memory comes from amdgpu's sysfs files (mem_info_vram_used and
// mem_info_vram_total under /sys/class/drm/cardN/device). Per-process usage
// comes from the DRM fdinfo memory keys (/proc/<pid>/fdinfo,
// Documentation/gpu/drm-usage-stats.rst), each client counted once by
// (PCI device, drm-client-id), and, for ROCm compute processes, which use
// KFD and do not appear in fdinfo, from
// /sys/class/kfd/kfd/proc/<pid>/vram_<gpu_id>. Devices are numbered in
// ROCm's order: the GPU nodes of the KFD topology, else PCI address order.
//
// Intel's xe and i915 expose no memory usage counter in sysfs (xe reports
// it only through the DRM_XE_DEVICE_QUERY_MEM_REGIONS ioctl, i915 through
// DRM_I915_QUERY_MEMORY_REGIONS and only to CAP_PERFMON), so their devices
// are found and named but refused: a GPU without a usage figure must not
// look 0 % used.
//
// Parsers (parse.go) are pure functions over the kernel's text formats;
// the I/O around them reads below a sysfs and a procfs root (GPUGUARD_SYSFS
// and GPUGUARD_PROCFS), so tests and e2e runs use fake trees.
package drm
