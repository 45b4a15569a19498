package gpu

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestClassifyXid(t *testing.T) {
	for _, tt := range []struct {
		xid  uint64
		want XidClass
	}{
		// The contract's critical list.
		{48, XidCritical}, {63, XidCritical}, {64, XidCritical}, {74, XidCritical}, {79, XidCritical},
		{92, XidCritical}, {94, XidCritical}, {95, XidCritical}, {119, XidCritical}, {120, XidCritical},
		// The contract's application list (NVIDIA's device plugin ignores them).
		{13, XidApplication}, {31, XidApplication}, {43, XidApplication}, {45, XidApplication},
		{68, XidApplication}, {109, XidApplication},
		// Anything else is taken for the GPU's fault, as the device plugin does.
		{0, XidCritical}, {8, XidCritical}, {154, XidCritical}, {99999, XidCritical},
	} {
		if got := ClassifyXid(tt.xid); got != tt.want {
			t.Errorf("ClassifyXid(%d) = %s, want %s", tt.xid, got, tt.want)
		}
	}
}

func TestXidMeaning(t *testing.T) {
	for xid, want := range map[uint64][]string{
		79:  {"Xid 79", "fallen off the bus", "critical"},
		13:  {"Xid 13", "graphics engine exception", "application error"},
		777: {"Xid 777", "unlisted", "critical"},
	} {
		got := XidMeaning(xid)
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("XidMeaning(%d) = %q, lacks %q", xid, got, w)
			}
		}
	}
}

func TestParseSimXid(t *testing.T) {
	t0 := time.Unix(0, 1700000000000000000)
	for _, tt := range []struct {
		name string
		in   string
		want []simXidEvent
		used int
	}{
		{"empty", "", nil, 0},
		{"one", "1700000000000000000 79\n", []simXidEvent{{t0, 79}}, 23},
		{"a partial last line waits", "1700000000000000000 79\n1700000000", []simXidEvent{{t0, 79}}, 23},
		{"malformed lines are skipped", "garbage\n1 x\n1700000000000000000 13\n", []simXidEvent{{t0, 13}}, 35},
	} {
		got, used := parseSimXid([]byte(tt.in))
		if !reflect.DeepEqual(got, tt.want) || used != tt.used {
			t.Errorf("%s: got %v %d, want %v %d", tt.name, got, used, tt.want, tt.used)
		}
	}
}

// drain returns the faults waiting on c.
func drain(c <-chan Fault) []Fault {
	var out []Fault
	for {
		select {
		case f := <-c:
			out = append(out, f)
		default:
			return out
		}
	}
}

// TestSimXid: an injected Xid reaches every Sim watching the device once,
// and none that does not; events from before a Sim opened are not its own.
// A critical Xid makes the device's samples fail with ErrGPULost until
// SimLostFor after the event; an application Xid does not.
func TestSimXid(t *testing.T) {
	dir := t.TempDir()
	old := time.Now().Add(-time.Hour)
	if err := SimXid(dir, 0, 48, old); err != nil {
		t.Fatal(err)
	}
	open := func(sel []int) *Sim {
		s, err := NewSim(SimOptions{Dir: dir, Devices: 2, Select: sel})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b, other := open(nil), open([]int{0}), open([]int{1})
	sample := func(s *Sim) error { _, err := s.Sample(context.Background()); return err }

	past := time.Now().Add(-2 * SimLostFor)
	if err := SimXid(dir, 0, 13, past); err != nil {
		t.Fatal(err)
	}
	if err := SimXid(dir, 0, 79, past.Add(time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*Sim{"a": a, "b": b} {
		if err := sample(s); err != nil {
			t.Fatalf("%s: an Xid older than %s still fails the sample: %v", name, SimLostFor, err)
		}
		got := drain(s.Faults())
		uuid := s.uuids[0]
		want := []Fault{{UUID: uuid, Index: 0, Xid: 13, Time: time.Unix(0, past.UnixNano())},
			{UUID: uuid, Index: 0, Xid: 79, Time: time.Unix(0, past.Add(time.Millisecond).UnixNano())}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: faults %+v, want %+v", name, got, want)
		}
		sample(s)
		if got := drain(s.Faults()); len(got) != 0 {
			t.Errorf("%s: delivered again: %+v", name, got)
		}
	}
	sample(other)
	if got := drain(other.Faults()); len(got) != 0 {
		t.Errorf("a Sim watching GPU 1 got GPU 0's faults: %+v", got)
	}

	if err := SimXid(dir, 0, 31, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := sample(a); err != nil {
		t.Errorf("an application Xid fails the sample: %v", err)
	}
	if err := SimXid(dir, 0, 79, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := sample(a); !errors.Is(err, ErrGPULost) {
		t.Errorf("right after a critical Xid: %v, want ErrGPULost", err)
	}
	if err := sample(a); !errors.Is(err, ErrGPULost) {
		t.Errorf("the device stays lost for %s: %v", SimLostFor, err)
	}
	if got := drain(a.Faults()); len(got) != 2 || got[1].Xid != 79 {
		t.Errorf("faults %+v, want Xid 31 then 79", got)
	}
	if err := sample(other); err != nil {
		t.Errorf("GPU 1 is fine: %v", err)
	}
}

// TestSimXidTruncated: an event file replaced by a shorter one is read
// from its start.
func TestSimXidTruncated(t *testing.T) {
	dir := t.TempDir()
	s, err := NewSim(SimOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Hour)
	for range 3 {
		SimXid(dir, 0, 13, past)
	}
	s.Sample(context.Background())
	drain(s.Faults())
	path := filepath.Join(dir, "0", SimXidFile)
	if err := os.WriteFile(path, []byte(formatSimXid(past, 43)), 0o644); err != nil {
		t.Fatal(err)
	}
	s.Sample(context.Background())
	if got := drain(s.Faults()); len(got) != 1 || got[0].Xid != 43 {
		t.Errorf("after truncation: %+v, want Xid 43", got)
	}
}

func TestSimXidBadGPU(t *testing.T) {
	if err := SimXid(t.TempDir(), -1, 79, time.Now()); err == nil {
		t.Error("GPU -1 accepted")
	}
}

// TestSimCalmSampleDoesNotLookForFaults: the device's listing tells
// whether its event file exists, so a sample of a device without one makes
// no call of its own for it (not a failing stat on every sample); one
// that appears is read, and one that goes and comes back is read from its
// start.
func TestSimCalmSampleDoesNotLookForFaults(t *testing.T) {
	dir := t.TempDir()
	s, err := NewSim(SimOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := SimSet(dir, 0, "tenant", 1<<30); err != nil {
		t.Fatal(err)
	}
	looks := 0
	s.faults.stat = func(p string) (os.FileInfo, error) { looks++; return os.Stat(p) }
	for range 3 {
		if _, err := s.Sample(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if looks != 0 {
		t.Fatalf("3 samples without an event file looked for it %d times", looks)
	}
	if err := SimXid(dir, 0, 13, time.Now()); err != nil {
		t.Fatal(err)
	}
	s.Sample(context.Background())
	if got := drain(s.Faults()); looks != 1 || len(got) != 1 || got[0].Xid != 13 {
		t.Fatalf("after an Xid: %d looks, faults %+v; want 1 and Xid 13", looks, got)
	}
	os.Remove(filepath.Join(dir, "0", SimXidFile))
	s.Sample(context.Background())
	if err := SimXid(dir, 0, 31, time.Now()); err != nil {
		t.Fatal(err)
	}
	s.Sample(context.Background())
	if got := drain(s.Faults()); len(got) != 1 || got[0].Xid != 31 {
		t.Fatalf("an event file made again: faults %+v, want Xid 31", got)
	}
}
