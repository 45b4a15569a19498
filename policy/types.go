package policy

import (
	"regexp"
	"syscall"
	"time"
)

// Policy is a resolved, validated policy. Every field holds its final value:
// defaults are applied and sizes, durations and signals are parsed.
type Policy struct {
	// Source is the file the policy came from ("" for built-in defaults).
	Source  string
	Name    string
	Command []string
	// Priority orders the tenants of a shared GPU: the lowest steps down
	// first and steps up last (-1000..1000).
	Priority int

	Watch      Watch
	Watermark  Watermark
	Restart    Restart
	Notify     Notify
	OOM        OOM
	Checkpoint Checkpoint
	Metrics    Metrics
	Journal    Journal
	Serve      Serve
	// Defer is [defer], the deferred-task queue (defer.go).
	Defer Defer

	// Profiles is the ladder: index 0 is the best quality, the last the
	// most frugal. Never empty: with none declared it holds "default".
	Profiles []Profile
}

// SetInterval is --interval: the flag wins over the file, and the bounds of
// the adaptive period widen to include it rather than refuse it.
func (p *Policy) SetInterval(d time.Duration) {
	w := &p.Watch
	w.Interval = d
	w.MinInterval = min(w.MinInterval, d)
	w.MaxInterval = max(w.MaxInterval, d)
}

// Watch says what to poll and how to compute the watermark.
type Watch struct {
	Backend  string // one of the names Parse was given (Backends)
	Interval time.Duration
	Scope    string // device | process
	Quota    uint64 // bytes; 0 = none
	// Adaptive polls faster while memory rises toward high and slower
	// (MaxInterval) while it is calm; MinInterval <= Interval <=
	// MaxInterval always holds.
	Adaptive    bool
	MinInterval time.Duration
	MaxInterval time.Duration
	// Settle is how long a starting child's memory must stay flat before
	// the next tenant of a shared GPU may start its own.
	Settle time.Duration
	// OnGPULost is what happens once no GPU reading has succeeded for
	// LostAfter (the driver says the GPU is lost, every call fails, or a
	// call hangs): keep the child and wait, or stop it and exit 1.
	OnGPULost string
	LostAfter time.Duration
}

// Scope values.
const (
	ScopeDevice  = "device"
	ScopeProcess = "process"
)

// OnGPULost values.
const (
	OnGPULostKeep = "keep"
	OnGPULostStop = "stop"
)

// Watermark holds the thresholds (ratios 0..1) and their timers.
type Watermark struct {
	High, Critical, Low float64
	Sustain, Grace      time.Duration
	RecoverAfter        time.Duration // 0 disables automatic step-up
	// Lead > 0 also steps down when the trend reaches Critical within
	// Lead (reason "predicted").
	Lead time.Duration
}

// Restart governs restarts, backoff and stopping.
type Restart struct {
	OnCrash     bool
	Backoff     time.Duration
	BackoffMax  time.Duration
	ResetAfter  time.Duration
	MaxRestarts int
	Window      time.Duration
	// StartSecs and StartRetries are supervisord's startsecs and
	// startretries: a child that exits on its own (not by OOM) before it
	// ran StartSecs or said it was ready never started, and StartRetries
	// such exits in a row give up at once (a typo in the command costs
	// seconds, not max_restarts backoffs). StartSecs 0 turns the rule off.
	StartSecs      time.Duration
	StartRetries   int
	StopSignal     syscall.Signal
	StopTimeout    time.Duration
	ReleaseTimeout time.Duration
	WhenFull       string // wait | lowest | exit
	// OnGPUFault is what a child exit caused by a GPU fault (Xid) leads
	// to: stop gpuguard (exit 1) or restart once the GPU answers again.
	OnGPUFault string // stop | restart
}

// OnGPUFault values.
const (
	OnGPUFaultStop    = "stop"
	OnGPUFaultRestart = "restart"
)

// WhenFull values.
const (
	WhenFullWait   = "wait"
	WhenFullLowest = "lowest"
	WhenFullExit   = "exit"
)

// Notify says how a live change is signalled to the child.
type Notify struct {
	Signal syscall.Signal // 0: send none
}

// OOM says how to recognise an out-of-memory exit.
type OOM struct {
	// Patterns holds the built-in patterns followed by the policy's own.
	Patterns   []*regexp.Regexp
	ExitCodes  []int
	ScanStderr bool
}

// Checkpoint locates the child's checkpoint and how many generations to keep.
type Checkpoint struct {
	Path string // "" = <state-dir>/checkpoint
	Keep int
}

// Metrics holds the Prometheus listen address ("" disables).
type Metrics struct {
	Listen string
}

// Journal bounds the event journal on disk.
type Journal struct {
	MaxSize  uint64        // bytes per file; the journal rotates past it
	MaxFiles int           // rotated files kept (events.jsonl.1 .. .N)
	MaxAge   time.Duration // > 0: rotated files are kept at least this long, even past MaxFiles
}

// Profile is one rung of the ladder.
type Profile struct {
	Name  string
	Needs uint64 // bytes; 0 = no estimate (always fits)
	Live  bool
	Env   map[string]string
	// NotServing is serving = false: the server answers no requests in
	// this profile (it sleeps through Enter, or is stopped without).
	NotServing bool
	Enter      []Action // run on entering this profile live
	Leave      []Action // run on leaving it live, before the next one's Enter
}
