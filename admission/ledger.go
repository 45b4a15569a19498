package admission

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gpuguard/gpuguard/internal/saturate"
)

// Decisions, as in the contract. Only DecisionGPU creates a lease.
const (
	DecisionGPU   = "gpu"
	DecisionCPU   = "cpu"
	DecisionDefer = "defer"
	DecisionDeny  = "deny"
)

// Priorities: P0 must run on the GPU or not at all, P1 can fall back to the
// CPU, P2 can wait.
const (
	P0 = "P0"
	P1 = "P1"
	P2 = "P2"
)

// DefaultTTL is how long a lease lives when the request names no TTL: long
// enough for a tool to allocate, short enough that a tool that crashed
// without releasing does not hold headroom for long.
const DefaultTTL = 60 * time.Second

// Bounds on what one instance holds for its tools, so that no client can
// make admission slow or gpuguard large: every decision sums the leases,
// and every lease keeps its tool's name.
const (
	// MaxTTL is the longest a lease may live: a tool that needs memory for
	// longer renews its reservation.
	MaxTTL = 24 * time.Hour
	// MaxToolBytes is the longest tool name a request may carry.
	MaxToolBytes = 256
	// MaxLeases is how many leases an instance holds at most; one more that
	// would be granted is denied, whatever its priority.
	MaxLeases = 10_000
)

// CutTool is tool as the journal may keep it: at most MaxToolBytes, a cut
// rune dropped. The protocol refuses longer names; this keeps a denial
// that came another way from flooding the journal with one.
func CutTool(tool string) string {
	if len(tool) <= MaxToolBytes {
		return tool
	}
	return strings.ToValidUTF8(tool[:MaxToolBytes], "")
}

// ReasonTooManyLeases is the reason of a reservation denied at MaxLeases.
const ReasonTooManyLeases = "too many leases"

// Request is one reservation request.
type Request struct {
	Bytes    uint64
	Priority string // P0 | P1 | P2; "" means P1
	Tool     string // who asks, for the journal
	TTL      time.Duration
}

// Validate reports a request the protocol must refuse: zero bytes, an
// unknown priority, a negative TTL or one over MaxTTL, or a tool name over
// MaxToolBytes.
func (r Request) Validate() error {
	if r.Bytes == 0 {
		return fmt.Errorf("bytes must be > 0")
	}
	if !ValidPriority(r.Priority) && r.Priority != "" {
		return fmt.Errorf("priority %q: want P0, P1 or P2", r.Priority)
	}
	if r.TTL < 0 {
		return fmt.Errorf("ttl %v: must not be negative", r.TTL)
	}
	if r.TTL > MaxTTL {
		return fmt.Errorf("ttl %v: at most %v", r.TTL, MaxTTL)
	}
	if len(r.Tool) > MaxToolBytes {
		return fmt.Errorf("tool is %d bytes, at most %d", len(r.Tool), MaxToolBytes)
	}
	return nil
}

// ValidPriority reports whether p is P0, P1 or P2.
func ValidPriority(p string) bool { return p == P0 || p == P1 || p == P2 }

// Decision is the answer to a Request. Lease is set only for DecisionGPU.
type Decision struct {
	Decision string
	Lease    string
	Reason   string
}

// GPUUsage is one watched GPU as admission sees it: Used is the measured
// usage, Limit the quota if one is set, else the device's total memory.
// Leased is the other tenants' outstanding leases on it (a shared GPU):
// headroom promised to them counts like this instance's own leases.
type GPUUsage struct {
	Used   uint64
	Limit  uint64
	Leased uint64
}

// Lease is headroom promised to a tool and not yet released.
type Lease struct {
	ID       string
	Bytes    uint64
	Priority string
	Tool     string
	Expires  time.Time
}

// Ledger holds the outstanding leases. It is safe for concurrent use so
// that Decide's check-and-lease is atomic even when requests arrive on
// several connections at once.
type Ledger struct {
	mu     sync.Mutex
	leases map[string]Lease
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger {
	return &Ledger{leases: make(map[string]Lease)}
}

// Decide answers r. usage is measured + outstanding (unexpired) leases; the
// request gets the GPU when usage + r.Bytes <= Limit × high on every GPU
// and no step-down is pending, and then a lease expiring at now + TTL;
// but while MaxLeases are held it is denied instead (reason
// ReasonTooManyLeases), whatever its priority.
// Otherwise P0 is denied, P1 sent to the CPU and P2 deferred. With no GPU
// measured yet nothing is known to fit, so the request falls back too.
func (l *Ledger) Decide(now time.Time, r Request, gpus []GPUUsage, high float64, stepPending bool) Decision {
	if err := r.Validate(); err != nil {
		return Decision{Decision: DecisionDeny, Reason: "invalid request: " + err.Error()}
	}
	if r.Priority == "" {
		r.Priority = P1
	}
	if r.TTL == 0 {
		r.TTL = DefaultTTL
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	leased := l.outstandingAt(now)

	var why string
	switch {
	case stepPending:
		why = "a step-down is pending"
	case len(gpus) == 0:
		why = "no GPU has been measured yet"
	default:
		w := worst(gpus, leased, r.Bytes, high)
		if w.fits && len(l.leases) >= MaxLeases {
			return Decision{Decision: DecisionDeny, Reason: fmt.Sprintf("%s: this instance holds %d, the most it may", ReasonTooManyLeases, len(l.leases))}
		}
		if w.fits {
			id := newLeaseID()
			l.leases[id] = Lease{ID: id, Bytes: r.Bytes, Priority: r.Priority, Tool: r.Tool, Expires: now.Add(r.TTL)}
			return Decision{Decision: DecisionGPU, Lease: id, Reason: "fits: " + w.text("<=") + fmt.Sprintf("; lease expires in %v", r.TTL)}
		}
		why = "does not fit: " + w.text(">")
	}
	return Decision{Decision: fallback(r.Priority), Reason: fmt.Sprintf("%s; %s gets %s", why, r.Priority, fallback(r.Priority))}
}

// Refuse answers r without looking at the GPUs: the fallback of its
// priority, with why (for example, a GPU's admission could not be decided).
func Refuse(r Request, why string) Decision {
	if r.Priority == "" {
		r.Priority = P1
	}
	return Decision{Decision: fallback(r.Priority), Reason: fmt.Sprintf("%s; %s gets %s", why, r.Priority, fallback(r.Priority))}
}

func fallback(priority string) string {
	switch priority {
	case P0:
		return DecisionDeny
	case P2:
		return DecisionDefer
	}
	return DecisionCPU
}

// Release ends a lease early; it reports whether the lease existed.
func (l *Ledger) Release(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.leases[id]
	delete(l.leases, id)
	return ok
}

// Expire drops the leases whose TTL has passed at now and returns them so
// the caller can journal them.
func (l *Ledger) Expire(now time.Time) []Lease {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Lease
	for id, ls := range l.leases {
		if !now.Before(ls.Expires) {
			out = append(out, ls)
			delete(l.leases, id)
		}
	}
	return out
}

// Clear drops every lease: the child that held them has exited, and its
// memory with it.
func (l *Ledger) Clear() {
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.leases)
}

// Count is the number of leases held (expired or not, until Expire).
func (l *Ledger) Count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.leases)
}

// Outstanding is the sum of the bytes of the leases held.
func (l *Ledger) Outstanding() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var sum uint64
	for _, ls := range l.leases {
		sum = saturate.Add(sum, ls.Bytes)
	}
	return sum
}

// outstandingAt sums the leases still live at now; an expired lease that
// Expire has not dropped yet no longer holds headroom.
func (l *Ledger) outstandingAt(now time.Time) uint64 {
	var sum uint64
	for _, ls := range l.leases {
		if now.Before(ls.Expires) {
			sum = saturate.Add(sum, ls.Bytes)
		}
	}
	return sum
}

// newLeaseID returns 128 random bits in hex: a lease ID is a capability to
// release headroom, so another tool should not be able to guess it.
func newLeaseID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux (Go 1.24+)
	return hex.EncodeToString(b[:])
}
