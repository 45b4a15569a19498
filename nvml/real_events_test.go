//go:build cgo

package nvml

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
)

// eventTypeNames names every NVML event type, for recording what a real
// GPU supports (eventNames names only the fault events gpuguard uses).
var eventTypeNames = []struct {
	bit  uint64
	name string
}{
	{gonvml.EventTypeSingleBitEccError, "SingleBitEccError"},
	{gonvml.EventTypeDoubleBitEccError, "DoubleBitEccError"},
	{gonvml.EventTypePState, "PState"},
	{gonvml.EventTypeXidCriticalError, "XidCriticalError"},
	{gonvml.EventTypeClock, "Clock"},
	{gonvml.EventTypePowerSourceChange, "PowerSourceChange"},
	{gonvml.EventMigConfigChange, "MigConfigChange"},
	{gonvml.EventTypeSingleBitEccErrorStorm, "SingleBitEccErrorStorm"},
	{gonvml.EventTypeDramRetirementEvent, "DramRetirementEvent"},
	{gonvml.EventTypeDramRetirementFailure, "DramRetirementFailure"},
	{gonvml.EventTypeNonFatalPoisonError, "NonFatalPoisonError"},
	{gonvml.EventTypeFatalPoisonError, "FatalPoisonError"},
	{gonvml.EventTypeGpuUnavailableError, "GpuUnavailableError"},
	{gonvml.EventTypeGpuRecoveryAction, "GpuRecoveryAction"},
}

// allEventNames names the event types in mask, and any bit it does not
// know by value.
func allEventNames(mask uint64) string {
	var names []string
	for _, e := range eventTypeNames {
		if mask&e.bit != 0 {
			names = append(names, e.name)
			mask &^= e.bit
		}
	}
	if mask != 0 {
		names = append(names, fmt.Sprintf("%#x", mask))
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, "|")
}

// TestRealEvents records what the real driver's event sets offer on GPU 0,
// provoking nothing: the event types the GPU supports, whether gpuguard's
// own registration (register) succeeds, one short wait (ERROR_TIMEOUT:
// nothing happened), and gpuguard's listener started and stopped through
// the probe. It needs a GPU and is skipped without one; scripts/gpu-smoke.sh
// runs it with -v and keeps the EVENTS lines.
func TestRealEvents(t *testing.T) {
	recordEvents(t, openReal(t), Options{LibraryPath: os.Getenv(EnvLibrary)}, 1000)
}

// recordEvents is TestRealEvents on lib; o opens the same library for the
// probe, and one wait lasts waitMs.
func recordEvents(t *testing.T, lib Library, o Options, waitMs uint32) {
	dev, ret := lib.DeviceGetHandleByIndex(0)
	if ret != gonvml.SUCCESS {
		t.Fatalf("GPU 0: %v", ret)
	}
	uuid, ret := dev.GetUUID()
	if ret != gonvml.SUCCESS {
		t.Fatalf("GPU 0: reading UUID: %v", ret)
	}
	supported, ret := dev.GetSupportedEventTypes()
	if ret != gonvml.SUCCESS {
		t.Errorf("EVENTS GPU 0: reading its supported event types: %v", ret)
	}
	t.Logf("EVENTS GPU 0 %s supports %s (%#x); gpuguard listens for %s", uuid, allEventNames(supported),
		supported, eventNames(faultEvents&supported))

	set, ret := lib.EventSetCreate()
	if ret != gonvml.SUCCESS {
		t.Fatalf("EVENTS creating an event set: %v", ret)
	}
	if err := register(lib, uuid, set); err != nil {
		t.Errorf("EVENTS registering GPU 0 as gpuguard does: %v", err)
	} else {
		t.Logf("EVENTS the event set registers on GPU 0 for %s", eventNames(faultEvents&supported))
		t0 := time.Now()
		data, ret := set.Wait(waitMs)
		switch ret {
		case gonvml.ERROR_TIMEOUT:
			t.Logf("EVENTS one wait of %d ms: ERROR_TIMEOUT after %v: nothing happened", waitMs, time.Since(t0).Round(time.Millisecond))
		case gonvml.SUCCESS:
			t.Logf("EVENTS one wait of %d ms: an event after %v: %s, data %d, GPU instance %#x, compute instance %#x",
				waitMs, time.Since(t0).Round(time.Millisecond), allEventNames(data.EventType), data.EventData,
				data.GpuInstanceId, data.ComputeInstanceId)
		default:
			t.Errorf("EVENTS one wait of %d ms: %v", waitMs, ret)
		}
	}
	if ret := set.Free(); ret != gonvml.SUCCESS {
		t.Errorf("EVENTS freeing the event set: %v", ret)
	}

	o.EventTimeout = 500 * time.Millisecond
	o.Logf = func(format string, args ...any) { t.Logf("EVENTS probe: "+format, args...) }
	p, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	p.(*probe).Faults()
	listening := p.(*probe).events != nil
	t0 := time.Now()
	if err := p.Close(); err != nil {
		t.Errorf("EVENTS closing the probe: %v", err)
	}
	t.Logf("EVENTS gpuguard's listener (500 ms waits): listening %v; Close took %v", listening,
		time.Since(t0).Round(time.Millisecond))
	if !listening && supported&faultEvents != 0 {
		t.Errorf("EVENTS the GPU supports %s but gpuguard's listener did not start", eventNames(faultEvents&supported))
	}
}

// TestRealMIG records each GPU's MIG mode (current and pending; it never
// changes them) and the devices gpuguard watches by default: the MIG
// instances of a GPU with MIG enabled, else the whole GPU. It needs a GPU
// and is skipped without one; scripts/gpu-smoke.sh keeps the MIG lines.
func TestRealMIG(t *testing.T) {
	recordMIG(t, openReal(t))
}

// recordMIG is TestRealMIG on lib.
func recordMIG(t *testing.T, lib Library) {
	n, ret := lib.DeviceGetCount()
	if ret != gonvml.SUCCESS {
		t.Fatalf("counting GPUs: %v", ret)
	}
	mode := map[int]string{gonvml.DEVICE_MIG_DISABLE: "disabled", gonvml.DEVICE_MIG_ENABLE: "enabled"}
	for i := range n {
		dev, ret := lib.DeviceGetHandleByIndex(i)
		if ret != gonvml.SUCCESS {
			t.Errorf("MIG GPU %d: %v", i, ret)
			continue
		}
		current, pending, ret := dev.GetMigMode()
		switch ret {
		case gonvml.SUCCESS:
			t.Logf("MIG GPU %d: mode current %s, pending %s", i, mode[current], mode[pending])
		case gonvml.ERROR_NOT_SUPPORTED:
			t.Logf("MIG GPU %d: not supported", i)
		default:
			t.Errorf("MIG GPU %d: reading the MIG mode: %v", i, ret)
		}
	}
	ts, err := selectTargets(lib, nil)
	if err != nil {
		t.Fatalf("MIG resolving the default selection: %v", err)
	}
	for _, tg := range ts {
		name, _ := tg.h.GetName()
		what := "the whole GPU"
		if tg.uuid != tg.parent {
			what = fmt.Sprintf("MIG instance %d/%d of %s", tg.gi, tg.ci, tg.parent)
		}
		t.Logf("MIG gpuguard watches device %d %s %q: %s", tg.index, tg.uuid, name, what)
	}
}

// TestRecordOnFake runs what TestRealEvents and TestRealMIG run on the
// GPU machine against go-nvml's fake DGX H200 (GPU 1 split into MIG
// instances), so a mistake in them shows here and does not waste the one
// run on real hardware.
func TestRecordOnFake(t *testing.T) {
	srv, _ := h200Split()
	withEvents(srv, gonvml.EventTypeXidCriticalError|gonvml.EventTypeDoubleBitEccError|gonvml.EventTypePState)
	recordEvents(t, srv, Options{Lib: srv}, 10)
	recordMIG(t, srv)
}
