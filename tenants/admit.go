package tenants

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
)

// Admission is the right to decide one reservation on a set of GPUs: their
// admission locks, and the other tenants' outstanding leases on each
// (bytes by GPU UUID). Release it once the lease is recorded.
type Admission struct {
	Others map[string]uint64
	locks  []*os.File
}

// Release unlocks the GPUs.
func (a *Admission) Release() {
	for _, f := range a.locks {
		f.Close()
	}
	a.locks = nil
}

// Admit takes the admission lock of every GPU in gpus (UUID order, each
// within LockWait; an error wrapping ErrLockHeld when one stays held) and
// asks the other tenants for their leases. A lease counts on every GPU its
// tenant watches. A tenant that is not running has none; one that does not
// answer keeps the leases it reported last (it may still hold them, and
// admitting against less could over-commit the GPU).
func (c *Coordinator) Admit(ctx context.Context, gpus []string) (*Admission, error) {
	a := &Admission{Others: make(map[string]uint64, len(gpus))}
	for _, g := range slices.Sorted(slices.Values(gpus)) {
		dir, err := GPUDir(c.o.RuntimeDir, g)
		if err == nil {
			var f *os.File
			if f, err = lockFile(ctx, filepath.Join(dir, admitLock), LockWait); err == nil {
				a.locks = append(a.locks, f)
				continue
			}
		}
		a.Release()
		return nil, fmt.Errorf("the admission lock of GPU %s: %w", g, err)
	}
	peers := c.discover(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := make(map[string]peerLeases, len(peers))
	for _, p := range peers {
		switch {
		case p.answered():
			seen[p.Name] = peerLeases{bytes: p.LeasesBytes, info: p.TenantInfo}
		case p.silent:
			if last, ok := c.leases[p.Name]; ok {
				seen[p.Name] = last
			}
		}
	}
	c.leases = seen
	for _, pl := range seen {
		for _, g := range gpus {
			if pl.info.Watches(g) {
				a.Others[g] = addSat(a.Others[g], pl.bytes)
			}
		}
	}
	return a, nil
}

// addSat adds without wrapping: an absurd figure must not become a small one.
func addSat(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}
