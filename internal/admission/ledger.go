package admission

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
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
	// total is the sum of every lease's bytes, expired or not (Outstanding).
	total uint64
	// live caches the sum of the leases live at a time (see liveAt), so
	// that a decision costs the same with 10,000 leases as with none.
	live liveSum
}

// liveSum is the sum of the leases live at at: every lease whose Expires is
// after at. It stays the sum of the live leases for any now in [at, until),
// until being no later than the earliest expiry among them, as long as
// every change to the leases is applied to it (add, drop).
type liveSum struct {
	valid     bool
	at, until time.Time
	sum       uint64
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
	leased := l.liveAt(now)

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
			l.add(Lease{ID: id, Bytes: r.Bytes, Priority: r.Priority, Tool: r.Tool, Expires: now.Add(r.TTL)})
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
	ls, ok := l.leases[id]
	if ok {
		l.drop(ls)
	}
	return ok
}

// Expire drops the leases whose TTL has passed at now and returns them so
// the caller can journal them.
func (l *Ledger) Expire(now time.Time) []Lease {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Lease
	for _, ls := range l.leases {
		if !now.Before(ls.Expires) {
			out = append(out, ls)
			l.drop(ls)
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
	l.total, l.live = 0, liveSum{}
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
	return l.total
}

// add records a new lease (its Expires is after any time liveAt was asked
// for, so it is live for the cache).
func (l *Ledger) add(ls Lease) {
	l.leases[ls.ID] = ls
	l.total = saturate.Add(l.total, ls.Bytes)
	if l.live.valid {
		l.live.sum = saturate.Add(l.live.sum, ls.Bytes)
		if ls.Expires.Before(l.live.until) {
			l.live.until = ls.Expires
		}
	}
}

// drop forgets a lease. The sums saturate, so a sum that did is counted
// afresh rather than made smaller than the leases it holds.
func (l *Ledger) drop(ls Lease) {
	delete(l.leases, ls.ID)
	if l.total == math.MaxUint64 {
		l.total = l.sumAll()
	} else {
		l.total -= ls.Bytes
	}
	if l.live.valid && ls.Expires.After(l.live.at) { // it was counted
		if l.live.sum == math.MaxUint64 {
			l.live.valid = false
		} else {
			l.live.sum -= ls.Bytes
		}
	}
}

func (l *Ledger) sumAll() uint64 {
	var sum uint64
	for _, ls := range l.leases {
		sum = saturate.Add(sum, ls.Bytes)
	}
	return sum
}

// liveAt sums the leases still live at now; an expired lease that Expire
// has not dropped yet no longer holds headroom. It counts them afresh only
// when a lease may have expired since the last count (or the clock went
// back): otherwise the cached sum is exact.
func (l *Ledger) liveAt(now time.Time) uint64 {
	if l.live.valid && !now.Before(l.live.at) && now.Before(l.live.until) {
		return l.live.sum
	}
	c := liveSum{valid: true, at: now, until: now.Add(100 * 365 * 24 * time.Hour)}
	for _, ls := range l.leases {
		if now.Before(ls.Expires) {
			c.sum = saturate.Add(c.sum, ls.Bytes)
			if ls.Expires.Before(c.until) {
				c.until = ls.Expires
			}
		}
	}
	l.live = c
	return c.sum
}

// newLeaseID returns 128 random bits in hex: a lease ID is a capability to
// release headroom, so another tool should not be able to guess it.
func newLeaseID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux (Go 1.24+)
	return hex.EncodeToString(b[:])
}
