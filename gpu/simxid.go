package gpu

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/gpuguard/gpuguard/internal/regfile"
)

// SimXidFile is the name of the append-only fault event file in each
// simulated device's directory. Its name starts with "." so usage
// accounting ignores it.
const SimXidFile = ".xid"

// SimLostFor is how long a simulated GPU stops answering after a critical
// Xid: its samples fail with ErrGPULost until then, as a real GPU's do
// until it is reset.
const SimLostFor = time.Second

// simXidReadMax bounds what one Sample reads of a device's event file.
const simXidReadMax = 64 << 10

// SimXid appends fault event xid, at now, to simulated device gpu under
// dir. Every Sim watching that device (every instance sharing dir)
// delivers it once. One write(2) with O_APPEND keeps concurrent appends
// whole.
func SimXid(dir string, gpu int, xid uint64, now time.Time) error {
	if gpu < 0 {
		return fmt.Errorf("sim: GPU %d: want a non-negative index", gpu)
	}
	devDir := simDeviceDir(dir, gpu)
	if err := os.MkdirAll(devDir, 0o755); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	f, err := regfile.Open(filepath.Join(devDir, SimXidFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	_, werr := f.WriteString(formatSimXid(now, xid))
	if err := errors.Join(werr, f.Close()); err != nil {
		return fmt.Errorf("sim: writing the fault event: %w", err)
	}
	return nil
}

func formatSimXid(t time.Time, xid uint64) string {
	return strconv.FormatInt(t.UnixNano(), 10) + " " + strconv.FormatUint(xid, 10) + "\n"
}

// simXidEvent is one line of the event file.
type simXidEvent struct {
	time time.Time
	xid  uint64
}

// parseSimXid reads the complete lines of b ("<unix nanoseconds> <xid>")
// and returns the events and how many bytes they took; a last line without
// its newline is left for the next read. Malformed lines are skipped.
func parseSimXid(b []byte) (events []simXidEvent, used int) {
	for {
		nl := bytes.IndexByte(b[used:], '\n')
		if nl < 0 {
			return events, used
		}
		line := b[used : used+nl]
		used += nl + 1
		ts, x, ok := bytes.Cut(bytes.TrimSpace(line), []byte(" "))
		if !ok {
			continue
		}
		ns, err1 := strconv.ParseInt(string(ts), 10, 64)
		xid, err2 := strconv.ParseUint(string(bytes.TrimSpace(x)), 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		events = append(events, simXidEvent{time: time.Unix(0, ns), xid: xid})
	}
}

// simFaults is the fault side of one Sim: where each watched device's event
// file was read up to, and until when a device is lost.
type simFaults struct {
	out       chan Fault
	uuid      map[int]string // each watched device's UUID
	path      map[int]string // each watched device's event file
	offset    map[int]int64
	lostUntil map[int]time.Time
	stat      func(string) (os.FileInfo, error) // os.Stat; a test counts the looks
}

// newSimFaults starts reading each watched device's event file (uuids maps
// their indices to their UUIDs) at its current end: faults from before the
// instance started are not its own.
func newSimFaults(dir string, uuids map[int]string) *simFaults {
	f := &simFaults{out: make(chan Fault, 64), uuid: uuids, path: map[int]string{}, offset: map[int]int64{}, lostUntil: map[int]time.Time{}, stat: os.Stat}
	for i := range uuids {
		f.path[i] = filepath.Join(simDeviceDir(dir, i), SimXidFile)
		if st, err := os.Stat(f.path[i]); err == nil {
			f.offset[i] = st.Size()
		}
	}
	return f
}

// poll reads device i's new events (present: the device's listing shows
// the event file), delivers them, and reports whether the device is lost
// at now. A fault that finds the channel full (the reader stopped
// reading) is dropped rather than blocking the sample.
func (f *simFaults) poll(i int, now time.Time, present bool) error {
	var events []simXidEvent
	if present {
		var err error
		if events, err = f.read(f.path[i], i); err != nil {
			return err
		}
	} else if f.offset[i] != 0 {
		f.offset[i] = 0 // gone: one made later is read from its start
	}
	for _, ev := range events {
		if ClassifyXid(ev.xid) == XidCritical {
			if until := ev.time.Add(SimLostFor); until.After(f.lostUntil[i]) {
				f.lostUntil[i] = until
			}
		}
		select {
		case f.out <- Fault{UUID: f.uuid[i], Index: i, Xid: ev.xid, Time: ev.time}:
		default:
		}
	}
	if now.Before(f.lostUntil[i]) {
		return fmt.Errorf("sim: GPU %d: a critical Xid until %s: %w", i, f.lostUntil[i].Format(time.RFC3339Nano), ErrGPULost)
	}
	return nil
}

// read returns the complete events appended to path since the last read.
func (f *simFaults) read(path string, i int) ([]simXidEvent, error) {
	st, err := f.stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		f.offset[i] = 0
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if st.Size() < f.offset[i] { // replaced or truncated: start over
		f.offset[i] = 0
	}
	if st.Size() == f.offset[i] {
		return nil, nil
	}
	fh, err := regfile.Open(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(io.NewSectionReader(fh, f.offset[i], simXidReadMax), simXidReadMax))
	if err != nil {
		return nil, err
	}
	events, used := parseSimXid(b)
	if used == 0 && len(b) == simXidReadMax {
		used = len(b) // one giant line: skip it rather than stall
	}
	f.offset[i] += int64(used)
	return events, nil
}
