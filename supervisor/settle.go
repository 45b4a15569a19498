package supervisor

import "time"

// settleGrowth is the least growth that counts: memory that grows by less
// than this above its running peak (or 1% of the memory it is measured
// against, whichever is more) is flat. Allocators round and fragment, and a
// server serving its first requests wobbles by a few MiB; what matters for
// the next tenant's sizing is the big allocations (weights, KV cache).
const settleGrowth = 64 << 20

// settleTracker says when a starting child's memory has stopped growing:
// no growth above its running peak for `settle`. It is pure: usage in,
// verdict out.
type settleTracker struct {
	settle time.Duration
	since  time.Time // the last growth (at first: the launch)
	peak   uint64
}

// newSettleTracker starts at the launch, from baseline: 0 for the child's
// own usage, the device's used memory when only that is known (it holds
// the other tenants' memory too).
func newSettleTracker(launched time.Time, settle time.Duration, baseline uint64) settleTracker {
	return settleTracker{settle: settle, since: launched, peak: baseline}
}

// observe feeds one reading, used bytes out of total, and reports whether
// the memory has now been flat for settle.
func (s *settleTracker) observe(now time.Time, used, total uint64) bool {
	if used > s.peak && used-s.peak > max(uint64(settleGrowth), total/100) {
		s.peak, s.since = used, now
	}
	return now.Sub(s.since) >= s.settle
}
