package drm

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// cardName matches a DRM card node (not a connector such as card0-DP-1,
// nor a render node).
var cardName = regexp.MustCompile(`^card[0-9]+$`)

// card is one DRM device found in sysfs.
type card struct {
	node   string // "card0"
	dir    string // its device's sysfs dir (<sysfs>/class/drm/card0/device)
	driver string
	pci    string // PCI address, lower case
	pciID  string // vendor:device
	uuid   string // GPU-<unique_id>, else the PCI address
	name   string
	gpuID  uint32 // KFD gpu_id; 0 when the device is not in the KFD topology
	render string // Intel: its render node (renderD128), for the memory query
	// why is "" for a device with memory counters, else why it has none.
	why   string
	total uint64
}

// scanCards lists the DRM cards under sysfs, one per PCI device (compute
// partitions add cards that share one device's memory), in PCI order.
func scanCards(sysfs string) ([]card, error) {
	base := filepath.Join(sysfs, "class", "drm")
	ents, err := os.ReadDir(base)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []card
	seen := map[string]bool{}
	for _, e := range ents {
		if !cardName.MatchString(e.Name()) {
			continue
		}
		c := readCard(base, e.Name())
		if seen[c.pci] {
			continue
		}
		seen[c.pci] = true
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b card) int { return strings.Compare(a.pci, b.pci) })
	return out, nil
}

// readCard reads what sysfs says about one card: driver, PCI address,
// name, UUID and, for amdgpu, whether its memory counters can be read
// (for Intel, its render node).
func readCard(base, node string) card {
	dir := filepath.Join(base, node, "device")
	ue, _ := os.ReadFile(filepath.Join(dir, "uevent"))
	u := parseUevent(ue)
	c := card{node: node, dir: dir, driver: u.driver, pci: u.slot, pciID: u.id}
	if c.pci == "" {
		if target, err := filepath.EvalSymlinks(dir); err == nil {
			c.pci = strings.ToLower(filepath.Base(target))
		} else {
			c.pci = node
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "unique_id")); err == nil {
		c.uuid = parseUniqueID(b)
	}
	switch c.driver {
	case "amdgpu":
		c.name = readName(dir, "AMD GPU", c.pciID)
		total, err := readUint(filepath.Join(dir, "mem_info_vram_total"))
		if err == nil {
			_, err = readUint(filepath.Join(dir, "mem_info_vram_used"))
		}
		switch {
		case err != nil:
			c.why = fmt.Sprintf("amdgpu memory counters unreadable: %v", err)
		case total == 0:
			c.why = "amdgpu reports no VRAM (mem_info_vram_total is 0)"
		}
		c.total = total
	case "xe", "i915":
		// No counter in sysfs: Open asks the driver (intel.go).
		c.name = readName(dir, "Intel GPU", c.pciID)
		c.render = renderNodeOf(dir)
	case "":
		c.why = "no driver bound"
	default:
		c.name = readName(dir, c.driver, c.pciID)
		c.why = "driver " + c.driver + " is not amdgpu, xe or i915"
	}
	return c
}

// intel reports whether the card's driver is Intel's (xe, i915), whose
// memory figures come from a query ioctl rather than sysfs.
func (c card) intel() bool { return c.driver == "xe" || c.driver == "i915" }

// readName is the board's product name where the driver gives one
// (amdgpu's product_name, from the board's FRU), else kind and PCI id.
func readName(dir, kind, pciID string) string {
	if b, err := os.ReadFile(filepath.Join(dir, "product_name")); err == nil {
		if s := strings.TrimSpace(string(b)); s != "" {
			return s
		}
	}
	if pciID == "" {
		return kind
	}
	return kind + " (" + pciID + ")"
}

// readUint reads a sysfs number attribute. It is read on every sample:
// os.ReadFile would allocate the 4 KiB page size sysfs reports as the
// file's, for some 20 bytes.
func readUint(path string) (uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var buf [64]byte
	m, err := io.ReadFull(f, buf[:])
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return 0, err
	}
	n, err := parseUint(buf[:m])
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}

// kfdDir is the KFD directory under sysfs.
func kfdDir(sysfs string) string { return filepath.Join(sysfs, "class", "kfd", "kfd") }

// readTopology lists the KFD topology's GPU nodes in node order (ROCm's
// device order); nil when there is no topology.
func readTopology(sysfs string) ([]kfdNode, error) {
	base := filepath.Join(kfdDir(sysfs), "topology", "nodes")
	ents, err := os.ReadDir(base)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ids []int
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil && n >= 0 {
			ids = append(ids, n)
		}
	}
	slices.Sort(ids) // numerically: node 10 comes after node 9
	var out []kfdNode
	for _, id := range ids {
		dir := filepath.Join(base, strconv.Itoa(id))
		gpuID, err1 := os.ReadFile(filepath.Join(dir, "gpu_id"))
		props, err2 := os.ReadFile(filepath.Join(dir, "properties"))
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("KFD topology node %d: %w", id, err)
		}
		n, gpu, err := parseNode(gpuID, props)
		if err != nil {
			return nil, fmt.Errorf("KFD topology node %d: %w", id, err)
		}
		if gpu {
			out = append(out, n)
		}
	}
	return out, nil
}

// order puts the cards in ROCm's order: the GPU nodes of the KFD topology
// first, in node order, then the cards it does not list, in PCI order
// (the order of cards already). Each card in the topology gets its KFD
// gpu_id, and its unique id when sysfs had none.
func order(cards []card, nodes []kfdNode) []card {
	out := make([]card, 0, len(cards))
	used := make([]bool, len(cards))
	for _, n := range nodes {
		i := slices.IndexFunc(cards, func(c card) bool { return c.pci == n.pci })
		if i < 0 || used[i] {
			continue
		}
		used[i] = true
		c := cards[i]
		c.gpuID = n.gpuID
		if c.uuid == "" {
			c.uuid = uuidOf(n.uniqueID)
		}
		out = append(out, c)
	}
	for i, c := range cards {
		if !used[i] {
			out = append(out, c)
		}
	}
	for i := range out {
		if out[i].uuid == "" {
			out[i].uuid = out[i].pci
		}
	}
	return out
}
