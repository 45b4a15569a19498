package execpages

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// mapping is one entry of /proc/self/smaps, as far as Release needs it.
type mapping struct {
	lo, hi    uintptr
	perms     string // "r-xp"
	path      string
	rss, anon int64 // KiB
	locked    int64 // KiB
}

// droppable says whether m is a mapping of the executable exe whose pages
// are all clean copies of the file: private, never writable, with no
// anonymous (copy-on-write) page and nothing locked.
func (m mapping) droppable(exe string) bool {
	return m.path == exe && len(m.perms) == 4 && m.perms[1] == '-' && m.perms[3] == 'p' &&
		m.anon == 0 && m.locked == 0 && m.rss > 0
}

// parse reads the mappings of an smaps text.
func parse(smaps []byte) ([]mapping, error) {
	var out []mapping
	sc := bufio.NewScanner(bytes.NewReader(smaps))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if lo, hi, ok := strings.Cut(f[0], "-"); ok && len(f) >= 5 {
			a, err1 := strconv.ParseUint(lo, 16, 64)
			b, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("smaps: bad range %q", f[0])
			}
			m := mapping{lo: uintptr(a), hi: uintptr(b), perms: f[1]}
			if len(f) >= 6 {
				m.path = strings.Join(f[5:], " ")
			}
			out = append(out, m)
			continue
		}
		if len(out) == 0 || len(f) < 2 {
			continue
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue // VmFlags and other non-numeric lines
		}
		switch m := &out[len(out)-1]; f[0] {
		case "Rss:":
			m.rss = n
		case "Anonymous:":
			m.anon = n
		case "Locked:":
			m.locked = n
		}
	}
	return out, sc.Err()
}

// Release drops this process's mappings of its executable's clean pages
// (see the package doc) and returns how many KiB were mapped there.
func Release() (releasedKiB int64, err error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, fmt.Errorf("finding the executable: %w", err)
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return 0, fmt.Errorf("reading the mappings: %w", err)
	}
	maps, err := parse(smaps)
	if err != nil {
		return 0, err
	}
	for _, m := range maps {
		if !m.droppable(exe) {
			continue
		}
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, m.lo, m.hi-m.lo, unix.MADV_DONTNEED); errno != 0 {
			return releasedKiB, fmt.Errorf("releasing %x-%x: %w", m.lo, m.hi, errno)
		}
		releasedKiB += m.rss
	}
	return releasedKiB, nil
}
