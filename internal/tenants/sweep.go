package tenants

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpuguard/gpuguard/internal/paths"
)

// What cannot be read as a record is void (see readJSON): it decides
// nothing, and sweep removes it once it is old enough that no live tenant
// can be writing it. Tenants never write a record in place (a temporary
// file, then link or rename), so a void record was never a tenant's; the
// age only keeps the sweep from racing a writer that has not renamed yet.
const (
	// voidAfter is the age (by modification time) from which a void or
	// unknown file in a GPU's directory is removed.
	voidAfter = 10 * time.Second
	// sweepEvery is how often one coordinator sweeps one GPU's directory.
	sweepEvery = 10 * time.Second
)

// maybeSweep starts a sweep of dir in the background when this coordinator
// has not swept it for sweepEvery. The sweep never holds a decision, a
// start or a reservation: 10,000 junk files take a while to remove.
func (c *Coordinator) maybeSweep(dir string) {
	now := time.Now()
	c.sweepMu.Lock()
	if c.sweeping[dir] || now.Sub(c.swept[dir]) < sweepEvery {
		c.sweepMu.Unlock()
		return
	}
	c.sweeping[dir] = true
	c.sweepMu.Unlock()
	c.wg.Go(func() {
		n := sweep(dir, time.Now(), voidAfter)
		if n > 0 {
			c.o.Logf("removed %d void or unknown file(s) from %s", n, dir)
		}
		c.sweepMu.Lock()
		delete(c.sweeping, dir)
		c.swept[dir] = time.Now()
		c.sweepMu.Unlock()
	})
}

// sweep removes from the GPU directory dir what is older than age at now
// and is not a record a tenant wrote: files of unknown names, records that
// are not regular files or cannot be parsed, and temporary files a crash
// left. It returns how many it removed. Failures are ignored (the next
// sweep tries again).
func sweep(dir string, now time.Time, age time.Duration) int {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	n := 0
	for _, de := range ents {
		name := de.Name()
		if name == admitLock || name == decideLock {
			continue // openLock replaces one that is not a file
		}
		fi, err := de.Info() // lstat: a link is judged, never followed
		if err != nil || now.Sub(fi.ModTime()) < age {
			continue
		}
		path := filepath.Join(dir, name)
		if !void(path, name, fi) {
			continue
		}
		if os.Remove(path) == nil {
			n++
		}
	}
	return n
}

// void reports whether the file name (info fi, not followed) in a GPU's
// directory is no record a tenant could have written.
func void(path, name string, fi fs.FileInfo) bool {
	if strings.HasPrefix(name, tmpPrefix) {
		return true // a crashed write's leftover: sweep only sees old ones
	}
	if !fi.Mode().IsRegular() || fi.Size() > MaxFileBytes {
		return true
	}
	if p, seq, end, ok := parseName(name); ok {
		switch {
		case end:
			var e End
			return !readJSON(path, &e)
		case p == decisionPrefix:
			var cl Claim
			return !readJSON(path, &cl) || cl.Seq != seq
		default:
			var sc StartClaim
			return !readJSON(path, &sc) || sc.Seq != seq
		}
	}
	for _, p := range []string{infoPrefix, leasePrefix} {
		if who, ok := strings.CutPrefix(name, p); ok && paths.ValidName(who) == nil {
			// A tenant's own file: kept even when it does not parse, since
			// its tenant may be alive and will replace it (it looks at its
			// info every republishEvery, and writes it again when spoiled).
			return false
		}
	}
	return true
}
