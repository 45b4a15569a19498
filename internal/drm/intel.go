package drm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// An Intel GPU (xe, i915) has no memory counter in sysfs. Its driver
// answers a memory-regions query on the render node instead, with a real
// figure for device memory only when the caller has CAP_PERFMON or
// CAP_SYS_ADMIN: xe reports 0 used, and i915 all of it unallocated, to
// anyone else. So gpuguard watches an Intel GPU only when it holds one of
// those capabilities (root does), and only a GPU with device memory
// (discrete; an integrated GPU allocates from system RAM, which gpuguard
// does not treat as GPU memory).

// vramSource reads one GPU's device memory. The probe keeps one open per
// watched Intel GPU, and closes it.
type vramSource interface {
	read() (vram, error)
	Close() error
}

// vramOpener opens the source of driver's GPU at a render node path
// (/dev/dri/renderD128). Options.openVRAM replaces the ioctl one in tests.
type vramOpener func(driver, node string) (vramSource, error)

// renderNode is the ioctl vramSource.
type renderNode struct {
	fd    int
	query func(fd int) ([]byte, error)
	parse func([]byte) (vram, error)
}

func openRenderNode(driver, node string) (vramSource, error) {
	r := &renderNode{query: queryXe, parse: parseXeRegions}
	if driver == "i915" {
		r.query, r.parse = queryI915, parseI915Regions
	}
	fd, err := unix.Open(node, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: node, Err: err}
	}
	r.fd = fd
	return r, nil
}

func (r *renderNode) read() (vram, error) {
	b, err := r.query(r.fd)
	if err != nil {
		return vram{}, fmt.Errorf("memory regions query: %w", err)
	}
	return r.parse(b)
}

func (r *renderNode) Close() error { return unix.Close(r.fd) }

// renderNodeOf is the name of the card's render node (renderD128), from
// its device's drm directory in sysfs; "" when it has none.
func renderNodeOf(deviceDir string) string {
	ents, _ := os.ReadDir(filepath.Join(deviceDir, "drm"))
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "renderD") {
			return e.Name()
		}
	}
	return ""
}

// Capability bits (linux/capability.h).
const (
	capSysAdmin = 21
	capPerfmon  = 38
)

// seesDeviceMemory reports whether this process may read Intel device
// memory figures: CAP_PERFMON or CAP_SYS_ADMIN in its effective set
// (<procfs>/self/status, CapEff).
func seesDeviceMemory(procfs string) (bool, error) {
	b, err := os.ReadFile(filepath.Join(procfs, "self", "status"))
	if err != nil {
		return false, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		hex, ok := strings.CutPrefix(sc.Text(), "CapEff:")
		if !ok {
			continue
		}
		caps, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
		if err != nil {
			return false, fmt.Errorf("CapEff %q: %w", strings.TrimSpace(hex), err)
		}
		return caps&(1<<capSysAdmin|1<<capPerfmon) != 0, nil
	}
	return false, errors.New("no CapEff line")
}

// initialUserNS reports whether a uid_map (<procfs>/self/uid_map) is the
// initial user namespace's, which maps every uid to itself ("0 0
// 4294967295", user_namespaces(7)). An empty map is a namespace being set
// up; one that does not parse is taken for the initial one, as runc
// (libcontainer/userns) takes it.
func initialUserNS(uidMap []byte) bool {
	f := strings.Fields(string(uidMap))
	switch {
	case len(f) == 0:
		return false
	case len(f) < 3:
		return true
	}
	for _, s := range f[:3] {
		if _, err := strconv.ParseUint(s, 10, 64); err != nil {
			return true
		}
	}
	return f[0] == "0" && f[1] == "0" && f[2] == "4294967295"
}

// noCapability says why this process may not read Intel device memory
// figures, "" when it may. The drivers ask perfmon_capable(): CAP_PERFMON
// or CAP_SYS_ADMIN in the initial user namespace. Inside a user namespace
// of its own (a rootless container) a process's CapEff can hold both and
// still count for nothing there: xe would then report 0 used.
func noCapability(procfs string) string {
	ok, err := seesDeviceMemory(procfs)
	switch {
	case err != nil:
		return fmt.Sprintf("gpuguard's capabilities are unknown (%v)", err)
	case !ok:
		return "gpuguard has neither (run it as root, or give it cap_perfmon)"
	}
	// No uid_map: a kernel without user namespaces.
	if b, err := os.ReadFile(filepath.Join(procfs, "self", "uid_map")); err == nil && !initialUserNS(b) {
		return "gpuguard runs in a user namespace of its own (a rootless container?), where its capabilities do not reach the driver"
	}
	return ""
}

// intelCheck opens each Intel card's memory source and decides whether it
// can be watched; Open makes one per call.
type intelCheck struct {
	devfs, procfs string
	open          vramOpener
	// noCap is noCapability's answer, asked once, on the first Intel card
	// with a render node.
	noCap   string
	checked bool
}

// check fills c's total, or its why, and returns the open source of a
// card that can be watched (nil otherwise).
func (k *intelCheck) check(c *card) vramSource {
	if c.render == "" {
		c.why = c.driver + ": no render node (renderD*) under " + filepath.Join(c.dir, "drm")
		return nil
	}
	if !k.checked {
		k.noCap, k.checked = noCapability(k.procfs), true
	}
	if k.noCap != "" {
		c.why = c.driver + " reports memory use only to CAP_PERFMON or CAP_SYS_ADMIN, and " + k.noCap
		return nil
	}
	node := filepath.Join(k.devfs, "dri", c.render)
	src, err := k.open(c.driver, node)
	if err != nil {
		c.why = fmt.Sprintf("%s: %v", c.driver, err)
		return nil
	}
	v, err := src.read()
	if err == nil && v.total == 0 {
		err = errors.New("the driver reports no device memory (total 0)")
	}
	if err != nil {
		src.Close()
		c.why = fmt.Sprintf("%s at %s: %v", c.driver, node, err)
		return nil
	}
	c.total = v.total
	return src
}
