// Package drmtest writes fake sysfs and procfs trees, in the kernel's
// formats, for the DRM backend's tests, benchmarks and end-to-end runs
// (GPUGUARD_SYSFS and GPUGUARD_PROCFS point gpuguard at them).
package drmtest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// GPU is one fake amdgpu device.
type GPU struct {
	Card     int    // its DRM card number (cardN)
	PCI      string // PCI address, e.g. 0000:85:00.0
	Name     string // product_name ("" writes none)
	Total    uint64 // mem_info_vram_total
	Used     uint64 // mem_info_vram_used
	UniqueID uint64 // unique_id (0 writes none)
	GPUID    uint32 // KFD gpu_id (0: not in the KFD topology)
}

// WriteSysfs writes the GPUs under root (a sysfs mount point): their card
// directories and, for those with a GPUID, a KFD topology whose GPU nodes
// follow node 0, a CPU, in the order given.
func WriteSysfs(root string, gpus []GPU) error {
	var errs []error
	node := 1
	if err := write(filepath.Join(root, "class/kfd/kfd/topology/nodes/0/gpu_id"), "0\n"); err != nil {
		return err
	}
	errs = append(errs, write(filepath.Join(root, "class/kfd/kfd/topology/nodes/0/properties"),
		"cpu_cores_count 64\nsimd_count 0\nlocation_id 0\ndomain 0\nunique_id 0\n"))
	for _, g := range gpus {
		dev := filepath.Join(root, "class/drm", "card"+strconv.Itoa(g.Card), "device")
		errs = append(errs,
			write(filepath.Join(dev, "uevent"), "DRIVER=amdgpu\nPCI_ID=1002:74A1\nPCI_SLOT_NAME="+g.PCI+"\n"),
			write(filepath.Join(dev, "mem_info_vram_total"), fmt.Sprintf("%d\n", g.Total)),
			write(filepath.Join(dev, "mem_info_vram_used"), fmt.Sprintf("%d\n", g.Used)))
		if g.Name != "" {
			errs = append(errs, write(filepath.Join(dev, "product_name"), g.Name+"\n"))
		}
		if g.UniqueID != 0 {
			errs = append(errs, write(filepath.Join(dev, "unique_id"), fmt.Sprintf("%016x\n", g.UniqueID)))
		}
		if g.GPUID == 0 {
			continue
		}
		var domain, bus, slot, fn uint64
		if _, err := fmt.Sscanf(g.PCI, "%x:%x:%x.%x", &domain, &bus, &slot, &fn); err != nil {
			return fmt.Errorf("PCI address %q: %w", g.PCI, err)
		}
		dir := filepath.Join(root, "class/kfd/kfd/topology/nodes", strconv.Itoa(node))
		node++
		errs = append(errs, write(filepath.Join(dir, "gpu_id"), fmt.Sprintf("%d\n", g.GPUID)),
			write(filepath.Join(dir, "properties"), fmt.Sprintf(
				"cpu_cores_count 0\nsimd_count 304\nlocation_id %d\ndomain %d\ndrm_render_minor %d\nunique_id %d\n",
				bus<<8|slot<<3|fn, domain, 128+g.Card, g.UniqueID)))
	}
	return errors.Join(errs...)
}

// SetUsed replaces card's mem_info_vram_used (write and rename, so a
// reader sees the old or the new value).
func SetUsed(root string, card int, used uint64) error {
	path := filepath.Join(root, "class/drm", "card"+strconv.Itoa(card), "device", "mem_info_vram_used")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(fmt.Sprintf("%d\n", used)), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Client is one open DRM file of a process.
type Client struct {
	FD   int
	PDev string // drm-pdev
	ID   string // drm-client-id ("" writes none)
	VRAM string // drm-resident-vram, e.g. "1024 KiB"
}

// WriteProc writes process pid under procfs (a procfs mount point): its
// stdin, a non-DRM fd, and each client as an fd linked to a DRM render
// node with amdgpu's fdinfo.
func WriteProc(procfs string, pid int, clients []Client) error {
	dir := filepath.Join(procfs, strconv.Itoa(pid))
	if err := os.MkdirAll(filepath.Join(dir, "fd"), 0o755); err != nil {
		return err
	}
	errs := []error{
		link("/dev/null", filepath.Join(dir, "fd", "0")),
		write(filepath.Join(dir, "fdinfo", "0"), "pos:\t0\nflags:\t0100002\nmnt_id:\t25\nino:\t5\n"),
	}
	for _, c := range clients {
		fd := strconv.Itoa(c.FD)
		info := "pos:\t0\nflags:\t02100002\nmnt_id:\t24\nino:\t1073\ndrm-driver:\tamdgpu\n"
		if c.ID != "" {
			info += "drm-client-id:\t" + c.ID + "\n"
		}
		info += "drm-pdev:\t" + c.PDev + "\npasid:\t32780\ndrm-total-gtt:\t4 MiB\ndrm-resident-gtt:\t4 MiB\n" +
			"drm-total-vram:\t" + c.VRAM + "\ndrm-shared-vram:\t0\ndrm-resident-vram:\t" + c.VRAM + "\n" +
			"drm-memory-vram:\t" + c.VRAM + "\ndrm-engine-compute:\t1183274 ns\n"
		errs = append(errs, link("/dev/dri/renderD128", filepath.Join(dir, "fd", fd)),
			write(filepath.Join(dir, "fdinfo", fd), info))
	}
	return errors.Join(errs...)
}

// WriteKFD writes a ROCm compute process's VRAM on the GPU with gpuID
// under sysfs.
func WriteKFD(sysfs string, pid int, gpuID uint32, vram uint64) error {
	return write(filepath.Join(sysfs, "class/kfd/kfd/proc", strconv.Itoa(pid), fmt.Sprintf("vram_%d", gpuID)),
		fmt.Sprintf("%d\n", vram))
}

func write(path, data string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(data), 0o644)
}

func link(target, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	os.Remove(path)
	return os.Symlink(target, path)
}
