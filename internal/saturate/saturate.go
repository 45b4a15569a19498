// Package saturate adds byte counts without wrapping around. GPU memory
// figures come from files, drivers and peers; an absurd one must stay
// absurdly large, never wrap into a small number that fits under a limit.
package saturate

import "math"

// Add returns a + b, or math.MaxUint64 where that sum would wrap.
func Add(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}
