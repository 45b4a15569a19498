package gpu

import (
	"strconv"
	"time"
)

// Fault is one GPU fault event (an NVIDIA Xid) on a watched device.
type Fault struct {
	UUID  string // the watched device's UUID (a MIG instance's own for MIG)
	Index int    // the watched device's Device.Index
	Xid   uint64
	Time  time.Time // when gpuguard learnt of it
}

// FaultSource is implemented by the probes that can report GPU faults
// (NVML through an event set, the simulated GPU through `gpuguard sim xid`).
// The supervisor reads the channel on its loop; a probe that reports no
// faults does not implement it.
type FaultSource interface {
	// Faults starts listening (on its first call) and returns the channel
	// the faults arrive on; it is never closed. Closing the probe stops
	// the listening.
	Faults() <-chan Fault
}

// XidClass is what an Xid means for the GPU and the work on it.
type XidClass int

const (
	// XidCritical marks the GPU faulted: it needs a reset, lost memory
	// contents, or is gone. A child that dies now died of the GPU.
	XidCritical XidClass = iota
	// XidApplication is an error of the application's own making (a bad
	// memory access, a timeout of its kernel): the GPU stays healthy.
	XidApplication
)

func (c XidClass) String() string {
	if c == XidApplication {
		return "application"
	}
	return "critical"
}

// applicationXids are the Xids NVIDIA's Kubernetes device plugin ignores
// as application errors (internal/rm/health.go); everything else marks a
// GPU unhealthy there, and gpuguard follows the same rule.
var applicationXids = map[uint64]bool{13: true, 31: true, 43: true, 45: true, 68: true, 109: true}

// ClassifyXid says whether xid marks the GPU faulted. The contract names
// 48, 63, 64, 74, 79, 92, 94, 95, 119 and 120 critical and 13, 31, 43, 45,
// 68 and 109 application errors; an Xid in neither list is critical, as in
// NVIDIA's device plugin: an unknown fault is safer taken for the GPU's
// (the child is not restarted onto it blindly) than for the child's.
func ClassifyXid(xid uint64) XidClass {
	if applicationXids[xid] {
		return XidApplication
	}
	return XidCritical
}

// xidMeanings names the Xids seen most on data-centre GPUs (NVIDIA's Xid
// catalogue, docs.nvidia.com/deploy/xid-errors).
var xidMeanings = map[uint64]string{
	13:  "graphics engine exception",
	31:  "GPU memory page fault",
	43:  "GPU stopped processing",
	45:  "preemptive cleanup, due to previous errors",
	48:  "double-bit ECC error",
	61:  "internal micro-controller breakpoint/warning",
	62:  "internal micro-controller halt",
	63:  "ECC page retirement or row remapping recording event",
	64:  "ECC page retirement or row remapping recording failure",
	68:  "video processor exception",
	69:  "graphics engine class error",
	74:  "NVLink error",
	79:  "GPU has fallen off the bus",
	92:  "high single-bit ECC error rate",
	94:  "contained ECC error",
	95:  "uncontained ECC error",
	109: "context switch timeout",
	119: "GSP RPC timeout",
	120: "GSP error",
	121: "C2C link error",
	140: "unrecovered ECC error",
}

// XidMeaning describes xid for the journal and the log: its name where
// known, and what gpuguard makes of it.
func XidMeaning(xid uint64) string {
	name, ok := xidMeanings[xid]
	if !ok {
		name = "unlisted Xid"
	}
	if ClassifyXid(xid) == XidApplication {
		return "Xid " + strconv.FormatUint(xid, 10) + ": " + name + " (application error: the GPU stays in use)"
	}
	return "Xid " + strconv.FormatUint(xid, 10) + ": " + name + " (critical: the GPU is faulted until it answers again)"
}
