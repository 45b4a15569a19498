package policy

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Size units. The IEC ones (KiB..TiB) are powers of 1024, the SI ones
// (KB..TB) powers of 1000: GPU vendors quote GiB, disk vendors GB, and a
// policy must be able to say either exactly.
var sizeUnits = []struct {
	name string
	mult uint64
}{
	{"B", 1},
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"PiB", 1 << 50}, {"EiB", 1 << 60},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"PB", 1e15}, {"EB", 1e18},
}

// ParseSize parses a size: a plain number of bytes, or a number with one of
// the suffixes B, KiB, MiB, GiB, TiB (1024-based) or KB, MB, GB, TB
// (1000-based; PiB, EiB, PB and EB too, so FormatSize always reads back), e.g. "16GiB", "1.5GB", "512 MiB". Units are matched without
// regard to case ("16gib"); "Gb" is read as GB, not gigabits, since nobody
// sizes GPU memory in bits. A decimal that does not come out to a whole
// number of bytes is rounded down.
func ParseSize(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	end := 0
	for end < len(t) && (t[end] >= '0' && t[end] <= '9' || t[end] == '.') {
		end++
	}
	num, unit := t[:end], strings.TrimSpace(t[end:])
	if num == "" || strings.Count(num, ".") > 1 || num == "." {
		return 0, fmt.Errorf("invalid size %q: want a number of bytes or a number with a unit, e.g. \"16GiB\" or \"1.5GB\"", s)
	}
	mult := uint64(0)
	for _, u := range sizeUnits {
		if strings.EqualFold(unit, u.name) {
			mult = u.mult
			break
		}
	}
	if unit == "" {
		mult = 1
	}
	if mult == 0 {
		return 0, fmt.Errorf("invalid size %q: unknown unit %q (use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)", s, unit)
	}
	if !strings.Contains(num, ".") {
		n, err := strconv.ParseUint(num, 10, 64)
		if err != nil || n > math.MaxUint64/mult {
			return 0, fmt.Errorf("invalid size %q: too large", s)
		}
		return n * mult, nil
	}
	// Exact decimal arithmetic: 1.5GiB is 1610612736 bytes, not whatever a
	// float64 makes of it.
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	r.Mul(r, new(big.Rat).SetUint64(mult))
	q := new(big.Int).Quo(r.Num(), r.Denom())
	if !q.IsUint64() {
		return 0, fmt.Errorf("invalid size %q: too large", s)
	}
	return q.Uint64(), nil
}

// FormatSize renders n bytes for people, in 1024-based units with at most
// two decimals: "40 GiB", "1.5 GiB", "512 B". ParseSize reads the result
// back (exactly when no rounding was needed).
func FormatSize(n uint64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	i := 0
	for i < len(units)-1 && n >= 1<<(10*(i+1)) {
		i++
	}
	if i == 0 {
		return strconv.FormatUint(n, 10) + " B"
	}
	div := uint64(1) << (10 * i)
	if n%div == 0 {
		return strconv.FormatUint(n/div, 10) + " " + units[i]
	}
	v := strconv.FormatFloat(float64(n)/float64(div), 'f', 2, 64)
	v = strings.TrimRight(strings.TrimRight(v, "0"), ".")
	return v + " " + units[i]
}
