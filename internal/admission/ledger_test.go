package admission

import (
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"
)

const gib = 1 << 30

func TestDecide(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	one := []GPUUsage{{Used: 30 * gib, Limit: 40 * gib}}
	tests := []struct {
		name        string
		held        []Request // granted before the request under test
		req         Request
		gpus        []GPUUsage
		stepPending bool
		want        string
		reason      string // regexp the reason must match
	}{
		{name: "fits exactly at the threshold", req: Request{Bytes: 6 * gib}, gpus: one, want: DecisionGPU,
			reason: `^fits: 30 GiB used \+ 0 B leased \+ 6 GiB requested = 36 GiB <= 36 GiB \(0\.90 × 40 GiB\)`},
		{name: "one byte over: P1 goes to cpu", req: Request{Bytes: 6*gib + 1}, gpus: one, want: DecisionCPU,
			reason: `^does not fit: .* > 36 GiB .*; P1 gets cpu$`},
		{name: "P0 over is denied", req: Request{Bytes: 8 * gib, Priority: P0}, gpus: one, want: DecisionDeny, reason: `P0 gets deny$`},
		{name: "P2 over is deferred", req: Request{Bytes: 8 * gib, Priority: P2}, gpus: one, want: DecisionDefer, reason: `P2 gets defer$`},
		{name: "P0 that fits gets the gpu", req: Request{Bytes: gib, Priority: P0}, gpus: one, want: DecisionGPU},
		{name: "outstanding leases count", held: []Request{{Bytes: 4 * gib}}, req: Request{Bytes: 4 * gib}, gpus: one, want: DecisionCPU,
			reason: `30 GiB used \+ 4 GiB leased \+ 4 GiB requested = 38 GiB > 36 GiB`},
		{name: "step-down pending refuses even a small request", req: Request{Bytes: 1, Priority: P2}, gpus: one, stepPending: true,
			want: DecisionDefer, reason: `^a step-down is pending; P2 gets defer$`},
		{name: "the fullest GPU decides", req: Request{Bytes: 2 * gib},
			gpus: []GPUUsage{{Used: 0, Limit: 80 * gib}, {Used: 35 * gib, Limit: 40 * gib}, {Used: 10 * gib, Limit: 40 * gib}},
			want: DecisionCPU, reason: `35 GiB used .* > 36 GiB \(0\.90 × 40 GiB\)`},
		{name: "every GPU fits", req: Request{Bytes: 2 * gib},
			gpus: []GPUUsage{{Used: 0, Limit: 80 * gib}, {Used: 30 * gib, Limit: 40 * gib}}, want: DecisionGPU, reason: `30 GiB used`},
		{name: "other tenants' leases count on their GPU", held: []Request{{Bytes: 2 * gib}}, req: Request{Bytes: 2 * gib},
			gpus: []GPUUsage{{Used: 30 * gib, Limit: 40 * gib, Leased: 3 * gib}}, want: DecisionCPU,
			reason: `30 GiB used \+ 5 GiB leased \+ 2 GiB requested = 37 GiB > 36 GiB`},
		{name: "other tenants' leases on another GPU do not", req: Request{Bytes: 2 * gib},
			gpus: []GPUUsage{{Used: 30 * gib, Limit: 40 * gib}, {Used: 0, Limit: 40 * gib, Leased: 20 * gib}}, want: DecisionGPU},
		{name: "no GPU measured yet", req: Request{Bytes: 1}, want: DecisionCPU, reason: `no GPU has been measured yet; P1 gets cpu`},
		{name: "zero limit never fits", req: Request{Bytes: 1}, gpus: []GPUUsage{{Limit: 0}}, want: DecisionCPU},
		{name: "huge request does not wrap around", req: Request{Bytes: math.MaxUint64}, gpus: one, want: DecisionCPU},
		{name: "zero bytes is invalid", req: Request{Bytes: 0}, gpus: one, want: DecisionDeny, reason: `^invalid request: bytes`},
		{name: "unknown priority is invalid", req: Request{Bytes: 1, Priority: "P9"}, gpus: one, want: DecisionDeny, reason: `priority "P9"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := NewLedger()
			for _, h := range tt.held {
				if d := l.Decide(now, h, []GPUUsage{{Limit: 1 << 50}}, 1, false); d.Decision != DecisionGPU {
					t.Fatalf("setup: %+v", d)
				}
			}
			before := l.Count()
			d := l.Decide(now, tt.req, tt.gpus, 0.90, tt.stepPending)
			if d.Decision != tt.want {
				t.Fatalf("Decision = %q (%s), want %q", d.Decision, d.Reason, tt.want)
			}
			if tt.reason != "" && !regexp.MustCompile(tt.reason).MatchString(d.Reason) {
				t.Errorf("Reason = %q, want match %q", d.Reason, tt.reason)
			}
			granted := d.Decision == DecisionGPU
			if granted != (d.Lease != "") {
				t.Errorf("Lease = %q for decision %q", d.Lease, d.Decision)
			}
			if want := before + map[bool]int{true: 1}[granted]; l.Count() != want {
				t.Errorf("Count = %d, want %d", l.Count(), want)
			}
		})
	}
}

func TestLeaseLifecycle(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	gpus := []GPUUsage{{Used: 0, Limit: 10 * gib}}
	l := NewLedger()

	a := l.Decide(now, Request{Bytes: gib, TTL: time.Second, Tool: "a"}, gpus, 1, false)
	b := l.Decide(now, Request{Bytes: 2 * gib}, gpus, 1, false) // default TTL
	if a.Lease == "" || b.Lease == "" || a.Lease == b.Lease {
		t.Fatalf("leases %q %q", a.Lease, b.Lease)
	}
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(a.Lease) {
		t.Errorf("lease id %q is not 128 bits of hex", a.Lease)
	}
	if !strings.Contains(b.Reason, "expires in 1m0s") {
		t.Errorf("default TTL not applied: %q", b.Reason)
	}
	if l.Count() != 2 || l.Outstanding() != 3*gib {
		t.Fatalf("Count %d Outstanding %d", l.Count(), l.Outstanding())
	}

	// Once a's TTL has passed it no longer holds headroom, even before Expire.
	later := now.Add(time.Second)
	if d := l.Decide(later, Request{Bytes: 8 * gib}, gpus, 1, false); d.Decision != DecisionGPU {
		t.Fatalf("expired lease still counted: %+v", d)
	}
	exp := l.Expire(later)
	if len(exp) != 1 || exp[0].ID != a.Lease || exp[0].Tool != "a" || exp[0].Priority != P1 {
		t.Fatalf("Expire = %+v", exp)
	}
	if l.Release(a.Lease) {
		t.Error("released an expired lease")
	}
	if !l.Release(b.Lease) || l.Release(b.Lease) {
		t.Error("Release(b) twice should be true then false")
	}
	if l.Count() != 1 {
		t.Errorf("Count = %d, want 1", l.Count())
	}
	l.Clear()
	if l.Count() != 0 || l.Outstanding() != 0 {
		t.Errorf("after Clear: Count %d Outstanding %d", l.Count(), l.Outstanding())
	}
}

func TestRefuse(t *testing.T) {
	for prio, want := range map[string]string{"": DecisionCPU, P0: DecisionDeny, P1: DecisionCPU, P2: DecisionDefer} {
		d := Refuse(Request{Bytes: 1, Priority: prio}, "the admission lock of GPU X: held by a tenant that does not answer")
		if d.Decision != want || d.Lease != "" || !strings.HasPrefix(d.Reason, "the admission lock of GPU X") {
			t.Errorf("Refuse(%q) = %+v, want %s", prio, d, want)
		}
	}
}

// TestLeaseBounds: MaxLeases leases are granted, the next one that fits is
// denied whatever its priority (reason "too many leases"), and once one is
// released the next is granted again; a request that does not fit gets
// its usual fallback. A tool name over MaxToolBytes and a ttl over MaxTTL
// are invalid.
func TestLeaseBounds(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	gpus := []GPUUsage{{Used: 0, Limit: 1 << 50}}
	l := NewLedger()
	for range MaxLeases - 1 { // as Decide grants them, without its cost
		id := newLeaseID()
		l.leases[id] = Lease{ID: id, Bytes: 1, Expires: now.Add(time.Hour)}
	}
	d := l.Decide(now, Request{Bytes: 1, TTL: time.Hour}, gpus, 0.9, false)
	if d.Decision != DecisionGPU {
		t.Fatalf("lease %d: %+v", MaxLeases, d)
	}
	last := d.Lease
	for _, p := range []string{P0, P1, P2} {
		d := l.Decide(now, Request{Bytes: 1, Priority: p}, gpus, 0.9, false)
		if d.Decision != DecisionDeny || !strings.HasPrefix(d.Reason, ReasonTooManyLeases) {
			t.Errorf("%s past the bound: %+v, want deny, too many leases", p, d)
		}
	}
	if d := l.Decide(now, Request{Bytes: 1 << 52, Priority: P2}, gpus, 0.9, false); d.Decision != DecisionDefer {
		t.Errorf("one that does not fit: %+v, want its fallback", d)
	}
	l.Release(last)
	if d := l.Decide(now, Request{Bytes: 1}, gpus, 0.9, false); d.Decision != DecisionGPU {
		t.Errorf("after a release: %+v, want gpu", d)
	}
	for _, r := range []Request{
		{Bytes: 1, Tool: strings.Repeat("x", MaxToolBytes+1)},
		{Bytes: 1, TTL: MaxTTL + time.Nanosecond},
	} {
		if err := r.Validate(); err == nil {
			t.Errorf("Validate(tool %d bytes, ttl %v) = nil, want an error", len(r.Tool), r.TTL)
		}
	}
	if err := (Request{Bytes: 1, Tool: strings.Repeat("x", MaxToolBytes), TTL: MaxTTL}).Validate(); err != nil {
		t.Errorf("at the bounds: %v", err)
	}
}

// BenchmarkDecide is the cost of one granted decision (and its release)
// with no lease held, and with one less than MaxLeases held: the live sum
// is cached, so the two should cost about the same.
func BenchmarkDecide(b *testing.B) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	gpus := []GPUUsage{{Used: 0, Limit: 1 << 50}}
	for _, held := range []int{0, MaxLeases - 1} {
		b.Run(fmt.Sprintf("leases=%d", held), func(b *testing.B) {
			l := NewLedger()
			for range held {
				id := newLeaseID()
				l.leases[id] = Lease{ID: id, Bytes: 1, Tool: strings.Repeat("t", MaxToolBytes), Expires: now.Add(time.Hour)}
			}
			for b.Loop() {
				if d := l.Decide(now, Request{Bytes: 1}, gpus, 0.9, false); d.Lease != "" {
					l.Release(d.Lease)
				}
			}
		})
	}
}

// TestCutTool: a journaled tool name keeps at most MaxToolBytes, and never
// half a rune.
func TestCutTool(t *testing.T) {
	if got := CutTool(strings.Repeat("x", 60_000)); len(got) != MaxToolBytes {
		t.Errorf("60 KB name cut to %d bytes, want %d", len(got), MaxToolBytes)
	}
	if got := CutTool(strings.Repeat("x", MaxToolBytes-1) + "é"); got != strings.Repeat("x", MaxToolBytes-1) {
		t.Errorf("a cut rune was kept: %q", got[MaxToolBytes-2:])
	}
	if got := CutTool("embedder"); got != "embedder" {
		t.Errorf("short name changed: %q", got)
	}
}

// TestLiveSumMatchesRecount: through random grants, releases, expiries,
// clears and clock moves (back ones too), the cached live sum a decision
// uses and Outstanding always equal a fresh count of the leases.
func TestLiveSumMatchesRecount(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	gpus := []GPUUsage{{Used: 0, Limit: 1 << 62}}
	l := NewLedger()
	var ids []string
	for i := range 20_000 {
		switch op := rng.IntN(100); {
		case op < 50:
			d := l.Decide(now, Request{Bytes: 1 + rng.Uint64N(1<<30), TTL: time.Duration(1+rng.IntN(5000)) * time.Millisecond}, gpus, 0.9, false)
			if d.Lease != "" {
				ids = append(ids, d.Lease)
			}
		case op < 70 && len(ids) > 0:
			k := rng.IntN(len(ids))
			l.Release(ids[k])
			ids = append(ids[:k], ids[k+1:]...)
		case op < 80:
			l.Expire(now)
		case op < 81:
			l.Clear()
		case op < 97:
			now = now.Add(time.Duration(rng.IntN(200)) * time.Millisecond)
		default:
			now = now.Add(-time.Duration(rng.IntN(100)) * time.Millisecond)
		}
		l.mu.Lock()
		var live, all uint64
		for _, ls := range l.leases {
			all += ls.Bytes
			if now.Before(ls.Expires) {
				live += ls.Bytes
			}
		}
		got, total := l.liveAt(now), l.total
		l.mu.Unlock()
		if got != live || total != all {
			t.Fatalf("step %d: live %d (recount %d), total %d (recount %d)", i, got, live, total, all)
		}
	}
}
