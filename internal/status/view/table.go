package view

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/safetext"
)

// Options are the inputs of the table besides the data.
type Options struct {
	Now   time.Time // for "12s ago"
	Color bool      // ANSI colours: only on a terminal, never with NO_COLOR
}

// ANSI SGR codes.
const (
	bold   = "1"
	red    = "31"
	green  = "32"
	yellow = "33"
	dim    = "2"
)

// Colour thresholds for memory and watermark ratios: the policy defaults
// for low and high, since the instances' own thresholds are not in the
// status object.
const (
	warnRatio = 0.70
	hotRatio  = 0.90
)

// WriteTable writes the instances, then the GPUs.
func WriteTable(w io.Writer, r Report, o Options) error {
	var b strings.Builder
	if len(r.Instances) == 0 {
		b.WriteString("No running instances.\n")
	} else {
		t := table{header: []string{"NAME", "PID", "PRIO", "PROFILE", "GPU MEM", "WATERMARK", "POLL", "ETA", "RESTARTS", "UPTIME", "STATE", "READY", "LAST EVENT"}}
		for _, st := range r.Instances {
			t.add(instanceRow(st, o.Now))
		}
		t.write(&b, o.Color)
	}
	b.WriteString("\n")
	if len(r.GPUs) == 0 {
		b.WriteString("No GPUs.\n")
	} else {
		t := table{header: []string{"GPU", "NAME", "MEMORY", "TENANTS", "PROCESSES"}}
		owners := childOwners(r.Instances)
		for _, g := range r.GPUs {
			t.add(gpuRow(g, owners))
		}
		t.write(&b, o.Color)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// cell is one table cell; color is an SGR code applied after padding, so
// escape codes never upset the alignment.
type cell struct {
	text, color string
}

func plain(s string) cell { return cell{text: s} }

func instanceRow(st api.Status, now time.Time) []cell {
	if st.State == api.StateUnreachable {
		return []cell{plain(st.Name), plain(pid(st.PID)), plain("-"), plain("-"), plain("-"), plain("-"), plain("-"),
			plain("-"), plain("-"), plain("-"), {st.State, red}, plain("-"), {st.Error, dim}}
	}
	var used, total uint64
	for _, g := range st.GPUs {
		used += g.UsedBytes
		total += g.TotalBytes
	}
	mem := cell{text: "-"}
	if total > 0 {
		mem = cell{text: UsedOfTotal(used, total), color: ratioColor(float64(used) / float64(total))}
	}
	// The time until critical at the current trend, when rising: red
	// within a minute.
	eta := plain(ETA(st.ETASeconds))
	if st.ETASeconds != nil && *st.ETASeconds < 60 {
		eta.color = red
	}
	state := st.State
	if st.Observe {
		state += " (observe)"
	}
	if st.RoomFor != nil {
		state += " (room: " + *st.RoomFor + ")" // asleep for a peer that needed the memory
	}
	return []cell{
		plain(st.Name),
		plain(pid(st.PID)),
		plain(strconv.Itoa(st.Priority)),
		plain(fmt.Sprintf("%s (%d/%d)", st.Profile, st.Level, st.Levels)),
		mem,
		{strconv.FormatFloat(st.Watermark, 'f', 2, 64), ratioColor(st.Watermark)},
		plain(Period(st.IntervalSeconds)),
		eta,
		plain(strconv.Itoa(st.Restarts)),
		plain(Duration(st.UptimeSeconds)),
		{state, stateColor(st.State)},
		readyCell(st),
		plain(LastEvent(st.LastEvent, now)),
	}
}

// readyCell is the READY column: the front door's view of the child (or,
// without a door, whether a child runs), and the requests it holds.
func readyCell(st api.Status) cell {
	c := cell{text: "yes"}
	if !st.Ready {
		c = cell{text: "no", color: yellow}
	}
	if st.Held > 0 {
		c.text += fmt.Sprintf(" (%d held)", st.Held)
	}
	return c
}

func gpuRow(g api.GPU, owners map[int]string) []cell {
	procs := make([]string, 0, len(g.Processes))
	for _, p := range g.Processes {
		s := strconv.Itoa(p.PID)
		if name, ok := owners[p.PID]; ok {
			s += " " + name
		} else if p.Command != "" {
			s += " " + p.Command
		}
		procs = append(procs, s+" "+bytesText(p.UsedBytes))
	}
	procText := strings.Join(procs, ", ")
	if procText == "" {
		procText = "-"
	}
	mem := cell{text: "-"}
	if g.TotalBytes > 0 {
		ratio := float64(g.UsedBytes) / float64(g.TotalBytes)
		mem = cell{text: fmt.Sprintf("%s %3.0f%%", UsedOfTotal(g.UsedBytes, g.TotalBytes), 100*ratio), color: ratioColor(ratio)}
	}
	tenants := strings.Join(g.Tenants, ", ")
	if tenants == "" {
		tenants = "-"
	}
	return []cell{plain(strconv.Itoa(g.Index)), plain(g.Name), mem, plain(tenants), plain(procText)}
}

// childOwners maps each instance's child pid to the instance, so the GPU
// table can say whose process is whose.
func childOwners(sts []api.Status) map[int]string {
	m := map[int]string{}
	for _, st := range sts {
		if st.ChildPID > 0 {
			m[st.ChildPID] = st.Name
		}
	}
	return m
}

func pid(p int) string {
	if p <= 0 {
		return "-"
	}
	return strconv.Itoa(p)
}

func ratioColor(r float64) string {
	switch {
	case r >= hotRatio:
		return red
	case r >= warnRatio:
		return yellow
	}
	return ""
}

func stateColor(s string) string {
	switch s {
	case api.StateRunning:
		return green
	case api.StateExited, api.StateFatal, api.StateUnreachable:
		return red
	}
	return yellow
}

// table aligns cells by their visible width.
type table struct {
	header []string
	rows   [][]cell
}

// add adds a row, its text escaped (safetext): a cell may hold what a
// child, a client or a file wrote (a last event's reason, a process's
// command, an unreachable instance's error).
func (t *table) add(row []cell) {
	for i := range row {
		row[i].text = safetext.Escape(row[i].text)
	}
	t.rows = append(t.rows, row)
}

func (t *table) write(b *strings.Builder, color bool) {
	widths := make([]int, len(t.header))
	for i, h := range t.header {
		widths[i] = len([]rune(h))
	}
	for _, r := range t.rows {
		for i, c := range r {
			widths[i] = max(widths[i], len([]rune(c.text)))
		}
	}
	header := make([]cell, len(t.header))
	for i, h := range t.header {
		header[i] = cell{h, bold}
	}
	for _, r := range append([][]cell{header}, t.rows...) {
		for i, c := range r {
			text := c.text
			if i < len(r)-1 {
				text += strings.Repeat(" ", widths[i]-len([]rune(c.text))+2)
			}
			if color && c.color != "" {
				// Colour the text, not the padding.
				n := len(c.text)
				text = "\x1b[" + c.color + "m" + text[:n] + "\x1b[0m" + text[n:]
			}
			b.WriteString(text)
		}
		b.WriteString("\n")
	}
}
