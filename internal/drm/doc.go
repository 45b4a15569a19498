// Package drm is the AMD and Intel backend: a gpu.Probe
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
// Intel's xe and i915 expose no memory usage counter in sysfs. Their
// device memory comes from the driver's memory-regions query ioctl on the
// render node (intel.go, intel_query.go), which gives a real figure only
// to CAP_PERFMON or CAP_SYS_ADMIN: without one, and on integrated GPUs
// (no device memory), the device is found and named but refused, since a
// GPU without a real usage figure must not look 0 % used.
//
// Parsers (parse.go) are pure functions over the kernel's text formats;
// the I/O around them reads below a sysfs and a procfs root (GPUGUARD_SYSFS
// and GPUGUARD_PROCFS), so tests and e2e runs use fake trees.
package drm
