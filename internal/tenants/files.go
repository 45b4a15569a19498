package tenants

import (
	"cmp"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpuguard/gpuguard/internal/regfile"
)

// File names in a GPU's directory.
const (
	decisionPrefix = "d."
	startPrefix    = "s."
	endSuffix      = ".ok"
	tmpPrefix      = ".tmp-"
	admitLock      = "admit.lock"
	decideLock     = "decide.lock"
	gpusDir        = "gpus"
)

// MaxFileBytes is the most of any one file in a GPU's directory that is
// read: every record is a few hundred bytes, and a larger file (sparse,
// growing, a link to /dev/zero) is void, whatever it holds.
const MaxFileBytes = 64 << 10

// maxSeq bounds the seqs a record's name may carry: far more than any log
// reaches, and far enough from the int64 limit that seq+1 never wraps. A
// name with a larger seq is no record.
const maxSeq = 1 << 53

// ErrTaken is returned by create when the name exists: another tenant
// claimed that seq (or ended that claim) first.
var ErrTaken = errors.New("already taken")

var plainKey = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// Key is the directory name of a GPU: its UUID when that is a plain name,
// else a hash of it (a UUID with a slash must not make a path).
func Key(uuid string) string {
	if plainKey.MatchString(uuid) && uuid != "." && uuid != ".." {
		return uuid
	}
	h := sha256.Sum256([]byte(uuid))
	return "h-" + hex.EncodeToString(h[:16])
}

// GPUDir returns <runtime>/gpus/<key>, creating it private (0700, like the
// runtime dir, whatever the umask).
func GPUDir(runtime, uuid string) (string, error) {
	dir := filepath.Join(runtime, gpusDir, Key(uuid))
	if fi, err := os.Lstat(dir); err == nil && fi.IsDir() {
		return dir, nil
	} else if err == nil {
		// A file or a symlink where the GPU's dir belongs: never follow it
		// (it could lead anywhere); it is no tenant's, so replace it.
		if err := os.Remove(dir); err != nil {
			return "", fmt.Errorf("replacing %s, which is not a directory: %w", dir, err)
		}
	}
	for _, d := range []string{filepath.Join(runtime, gpusDir), dir} {
		if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("creating the GPU's tenant dir: %w", err)
		} else if err == nil {
			if err := os.Chmod(d, 0o700); err != nil {
				return "", fmt.Errorf("creating the GPU's tenant dir: %w", err)
			}
		}
	}
	return dir, nil
}

// create writes v as JSON to dir/name, exclusively: the content goes to a
// temporary file first and link(2) gives it its name, so nobody ever reads
// a partial file and of two tenants creating the same name one gets
// ErrTaken.
func create(dir, name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp, err := writeTemp(dir, b)
	if err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, filepath.Join(dir, name)); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return ErrTaken
		}
		return fmt.Errorf("creating %s: %w", name, err)
	}
	return nil
}

// writeReplace replaces dir/name with data atomically (temporary file,
// then rename), so a reader sees the old content or the new, never a part.
func writeReplace(dir, name string, data []byte) error {
	tmp, err := writeTemp(dir, data)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// writeTemp writes data to a new temporary file in dir and returns its
// path. The name starts with tmpPrefix: nobody reads it, and collect
// removes one that a crash left behind.
func writeTemp(dir string, data []byte) (string, error) {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(dir, tmpPrefix+hex.EncodeToString(rnd[:]))
	// O_EXCL: a name planted in advance (a link) is never written through.
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

func decisionName(seq int64) string { return decisionPrefix + strconv.FormatInt(seq, 10) }
func endName(seq int64) string      { return decisionName(seq) + endSuffix }
func startName(seq int64) string    { return startPrefix + strconv.FormatInt(seq, 10) }

// parseName splits "d.12" / "d.12.ok" / "s.3" into its prefix, seq and
// whether it is an end; ok is false for any other name.
func parseName(name string) (prefix string, seq int64, end, ok bool) {
	for _, p := range []string{decisionPrefix, startPrefix} {
		rest, found := strings.CutPrefix(name, p)
		if !found {
			continue
		}
		if p == decisionPrefix {
			rest, end = strings.CutSuffix(rest, endSuffix)
		}
		n, err := strconv.ParseInt(rest, 10, 64)
		if err != nil || n <= 0 || n > maxSeq || rest != strconv.FormatInt(n, 10) {
			return "", 0, false, false
		}
		return p, n, end, true
	}
	return "", 0, false, false
}

// readDecisions reads what the log's rules need, in seq order: every claim
// that has not ended, the ends above the newest confirmed decision (voids)
// and that decision, with their claims. Older entries cannot matter, so
// they are not read: a decision costs a few small reads however long the
// log. A claim that cannot be read or parsed (empty, torn, garbage, not a
// regular file, or collected meanwhile) is kept as a void entry (neither
// Claim nor End): it decides nothing, but its seq is taken.
func readDecisions(dir string) ([]Entry, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	ends := map[int64]bool{}
	var claims []int64
	for _, de := range ents {
		p, seq, end, ok := parseName(de.Name())
		if !ok || p != decisionPrefix {
			continue
		}
		if end {
			ends[seq] = true
		} else {
			claims = append(claims, seq)
		}
	}
	var out []Entry
	read := func(seq int64, withEnd bool) {
		e := Entry{Seq: seq}
		var c Claim
		if readJSON(filepath.Join(dir, decisionName(seq)), &c) && c.Seq == seq {
			e.Claim = &c
		}
		if withEnd {
			var v End
			if readJSON(filepath.Join(dir, endName(seq)), &v) {
				e.End = &v
			}
		}
		out = append(out, e)
	}
	for _, seq := range slices.Backward(slices.Sorted(maps.Keys(ends))) {
		read(seq, true)
		if n := len(out); n > 0 && out[n-1].Seq == seq && out[n-1].confirmed() {
			break // the newest confirmed decision: older ones do not matter
		}
	}
	for _, seq := range claims {
		if !ends[seq] {
			read(seq, false)
		}
	}
	slices.SortFunc(out, func(a, b Entry) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, nil
}

// readStarts reads what Blocking needs of the start claims at now, in seq
// order: the newest valid claim and the void or invalid ones above it.
// Older claims cannot matter (only the newest valid one may block, and the
// next seq is above the newest name), so they are not read: a claim costs
// one small read however many claims are kept (between Keep and 2 x Keep),
// where reading them all cost a read each on every start. One that cannot
// be read or parsed is kept with Void set: it blocks nobody, but its seq is
// taken.
func readStarts(dir string, now time.Time) ([]StartClaim, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var seqs []int64
	for _, de := range ents {
		if p, seq, _, ok := parseName(de.Name()); ok && p == startPrefix {
			seqs = append(seqs, seq)
		}
	}
	slices.Sort(seqs)
	var out []StartClaim
	for _, seq := range slices.Backward(seqs) {
		var c StartClaim
		if !readJSON(filepath.Join(dir, startName(seq)), &c) || c.Seq != seq {
			c = StartClaim{Seq: seq, Void: true}
		}
		out = append(out, c)
		if c.valid(now) {
			break
		}
	}
	slices.Reverse(out)
	return out, nil
}

// readJSON decodes the record at path into v; false when it is void: not
// a regular file (a FIFO, a symlink, a device), larger than MaxFileBytes,
// or not the JSON object of a record. It never blocks and never reads more
// than MaxFileBytes.
func readJSON(path string, v any) bool {
	b, err := regfile.ReadSmall(path, MaxFileBytes)
	return err == nil && json.Unmarshal(b, v) == nil
}

// newest is the highest seq with the prefix in dir (0 when none).
func newest(dir, prefix string) int64 {
	ents, _ := os.ReadDir(dir)
	var n int64
	for _, de := range ents {
		if p, seq, _, ok := parseName(de.Name()); ok && p == prefix {
			n = max(n, seq)
		}
	}
	return n
}

// collect removes the files of seqs with the prefix older than the Keep
// newest (below newest-Keep), and temporary files a crash left behind.
func collect(dir, prefix string, newest int64) {
	ents, _ := os.ReadDir(dir)
	for _, de := range ents {
		name := de.Name()
		if strings.HasPrefix(name, tmpPrefix) {
			if fi, err := de.Info(); err == nil && time.Since(fi.ModTime()) > time.Minute {
				os.Remove(filepath.Join(dir, name))
			}
			continue
		}
		if p, seq, _, ok := parseName(name); ok && p == prefix && seq <= newest-Keep {
			os.Remove(filepath.Join(dir, name))
		}
	}
}
