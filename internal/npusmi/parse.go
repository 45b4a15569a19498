package npusmi

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/gpuguard/gpuguard/gpu"
)

// npuMiB is npu-smi's "MB": 65536 MB of HBM is 64 GiB.
const npuMiB = 1 << 20

// usagePair matches "used / total" in a memory column ("56017/ 65536").
var usagePair = regexp.MustCompile(`(\d+)\s*/\s*(\d+)`)

// npuKey names a chip as npu-smi's process table does: NPU ID and chip.
type npuKey struct{ npu, chip int }

// npuTable is what `npu-smi info` shows.
type npuTable struct {
	Devices   []gpu.Device
	Processes []gpu.Process
}

// npuParser walks `npu-smi info` line by line.
type npuParser struct {
	out     npuTable
	index   map[npuKey]int // chip -> gpu.Device.Index, for the process table
	section int            // 0 before any table, then one of the below
	hbm     bool           // the memory cell has Memory-Usage and HBM-Usage
	idCol   bool           // the chip cell has a second id (Device or Phy-ID)
	npu     int            // NPU ID of the current NPU row
	name    string
}

const (
	npuSectionDevices = iota + 1
	npuSectionProcesses
)

// parseNPUSMI reads the text of `npu-smi info` (Ascend 910, 910B, 310P
// layouts). Each chip is one Device: Index is the chip's logical Device id
// (310P) or Phy-ID where the table shows one, else the NPU ID; UUID is
// "NPU-<npu>-<chip>" (npu-smi shows none). Used and Total come from the
// HBM column where there is one with a non-zero total, else from
// Memory-Usage.
func parseNPUSMI(text string) (npuTable, error) {
	p := npuParser{index: make(map[npuKey]int)}
	for n, line := range strings.Split(text, "\n") {
		if err := p.line(line); err != nil {
			return npuTable{}, fmt.Errorf("npu-smi output line %d: %w", n+1, err)
		}
	}
	if len(p.out.Devices) == 0 {
		return npuTable{}, errors.New("npu-smi output lists no NPU")
	}
	return p.out, nil
}

func (p *npuParser) line(line string) error {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "|") || !strings.HasSuffix(line, "|") || len(line) < 2 {
		return nil // a rule (+---+) or something outside the tables
	}
	cells := strings.Split(line[1:len(line)-1], "|")
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	first := strings.Fields(cells[0])
	switch {
	case len(cells) >= 2 && len(first) > 0 && first[0] == "NPU" && cells[1] == "Health":
		p.section = npuSectionDevices
		return nil
	case len(cells) >= 2 && len(first) > 0 && first[0] == "Chip" && cells[1] == "Bus-Id":
		p.idCol = len(first) > 1
		p.hbm = strings.Contains(line, "HBM-Usage")
		return nil
	case len(cells) >= 2 && cells[1] == "Process id":
		p.section = npuSectionProcesses
		return nil
	}
	switch p.section {
	case npuSectionDevices:
		return p.deviceRow(cells, first)
	case npuSectionProcesses:
		return p.processRow(cells, first)
	}
	return nil
}

// deviceRow reads an NPU row ("0  910B3 | OK | ...") or a chip row
// ("0 [id] | 0000:C1:00.0 | aicore  used / total  [hbm / total]").
func (p *npuParser) deviceRow(cells, first []string) error {
	if len(cells) < 3 || len(first) == 0 {
		return nil
	}
	ints, ok := atois(first)
	if !ok {
		npu, err := strconv.Atoi(first[0])
		if err != nil || len(first) < 2 {
			return fmt.Errorf("want an NPU row (ID and name), got %q", cells[0])
		}
		p.npu, p.name = npu, strings.Join(first[1:], " ")
		return nil
	}
	if p.name == "" {
		return fmt.Errorf("chip row %q before any NPU row", cells[0])
	}
	chip, index := ints[0], p.npu
	if p.idCol && len(ints) > 1 {
		index = ints[1]
	}
	used, total, err := npuMemory(cells[2], p.hbm)
	if err != nil {
		return err
	}
	name := p.name
	if !strings.HasPrefix(name, "Ascend") {
		name = "Ascend " + name
	}
	p.index[npuKey{p.npu, chip}] = index
	p.out.Devices = append(p.out.Devices, gpu.Device{
		Index: index,
		UUID:  fmt.Sprintf("NPU-%d-%d", p.npu, chip),
		Name:  name,
		Used:  used,
		Total: total,
	})
	return nil
}

// npuMemory picks used and total bytes out of the memory cell.
func npuMemory(cell string, hbm bool) (used, total uint64, err error) {
	pairs := usagePair.FindAllStringSubmatch(cell, -1)
	if len(pairs) == 0 {
		return 0, 0, fmt.Errorf("no \"used / total\" memory in %q", cell)
	}
	pick := pairs[0]
	if hbm && len(pairs) > 1 && pairs[1][2] != "0" {
		pick = pairs[1]
	}
	u, err1 := strconv.ParseUint(pick[1], 10, 64)
	t, err2 := strconv.ParseUint(pick[2], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, 0, err
	}
	if t == 0 {
		return 0, 0, fmt.Errorf("no memory total in %q", cell)
	}
	return u * npuMiB, t * npuMiB, nil
}

// processRow reads "npu chip | pid | name | MB"; a PID listed twice on a
// chip (two contexts) is summed.
func (p *npuParser) processRow(cells, first []string) error {
	if len(cells) < 4 || len(first) != 2 {
		return nil // "No running processes found in NPU 0"
	}
	ids, ok := atois(first)
	pid, err1 := strconv.Atoi(cells[1])
	mb, err2 := strconv.ParseUint(strings.Fields(cells[3] + " x")[0], 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return fmt.Errorf("want a process row (NPU, chip, PID, name, MB), got %q", strings.Join(cells, " | "))
	}
	index, ok := p.index[npuKey{ids[0], ids[1]}]
	if !ok {
		return fmt.Errorf("process %d on NPU %d chip %d, which the device table does not list", pid, ids[0], ids[1])
	}
	for i, q := range p.out.Processes {
		if q.PID == pid && q.Device == index {
			p.out.Processes[i].Used += mb * npuMiB
			return nil
		}
	}
	p.out.Processes = append(p.out.Processes, gpu.Process{PID: pid, Device: index, Used: mb * npuMiB})
	return nil
}

// atois converts every field to an int.
func atois(fields []string) ([]int, bool) {
	out := make([]int, len(fields))
	for i, f := range fields {
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, false
		}
		out[i] = n
	}
	return out, true
}
