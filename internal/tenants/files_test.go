package tenants

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func TestKey(t *testing.T) {
	for uuid, want := range map[string]string{
		"GPU-3f0a9c1e-0000-1111-2222-333344445555": "GPU-3f0a9c1e-0000-1111-2222-333344445555",
		"MIG-abc":        "MIG-abc",
		"0000:04:00.0":   "h-",
		"GPU-a/../../x":  "h-",
		"..":             "h-",
		"":               "h-",
		"GPU-x y":        "h-",
		"GPU-x\ny":       "h-",
		"0123456789ABCD": "0123456789ABCD",
	} {
		got := Key(uuid)
		if want == "h-" {
			if len(got) != 2+32 || got[:2] != "h-" {
				t.Errorf("Key(%q) = %q, want a hash", uuid, got)
			}
			continue
		}
		if got != want {
			t.Errorf("Key(%q) = %q, want %q", uuid, got, want)
		}
	}
	if Key("a:b") == Key("a;b") {
		t.Error("two UUIDs hash to one key")
	}
}

func TestGPUDirIsPrivate(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	run := t.TempDir()
	dir, err := GPUDir(run, "GPU-1")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(run, "gpus"), dir} {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v %v, want a 0700 dir", d, fi.Mode(), err)
		}
	}
	if again, err := GPUDir(run, "GPU-1"); err != nil || again != dir {
		t.Errorf("second GPUDir: %q %v", again, err)
	}
}

// TestCreateIsExclusive: of many goroutines creating one name, exactly one
// succeeds, and what it wrote is what every reader reads, never a part.
func TestCreateIsExclusive(t *testing.T) {
	dir := t.TempDir()
	for round := range 50 {
		var won atomic.Int32
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				err := create(dir, decisionName(int64(round+1)), Claim{Seq: int64(round + 1), By: string(rune('a' + i))})
				switch {
				case err == nil:
					won.Add(1)
				case !errors.Is(err, ErrTaken):
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if won.Load() != 1 {
			t.Fatalf("round %d: %d creators succeeded, want 1", round, won.Load())
		}
	}
	entries, err := readDecisions(dir)
	if err != nil || len(entries) != 50 || entries[0].Seq != 1 || entries[49].Seq != 50 || entries[49].Claim.By == "" {
		t.Fatalf("readDecisions: %d entries %v", len(entries), err)
	}
	if tmp, _ := filepath.Glob(filepath.Join(dir, tmpPrefix+"*")); len(tmp) != 0 {
		t.Errorf("temporary files left: %v", tmp)
	}
}

// decisionNames lists the decision log's file names, sorted.
func decisionNames(t *testing.T, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range ents {
		if p, _, _, ok := parseName(de.Name()); ok && p == decisionPrefix {
			names = append(names, de.Name())
		}
	}
	return strings.Join(names, " ")
}

// TestReadDecisions: only what the rules need is read: claims that have
// not ended, and the ends down to the newest confirmed decision.
func TestReadDecisions(t *testing.T) {
	dir := t.TempDir()
	put := func(name string, v any) {
		t.Helper()
		if err := create(dir, name, v); err != nil {
			t.Fatal(err)
		}
	}
	for seq := int64(1); seq <= 6; seq++ {
		put(decisionName(seq), Claim{Seq: seq, To: "w", At: seq})
	}
	put(endName(1), End{By: "w", At: 1})
	put(endName(2), End{Void: true})
	put(endName(3), End{By: "w", At: 3})
	put(endName(4), End{Void: true})
	put(endName(6), End{Void: true})
	entries, err := readDecisions(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		s := strconv.FormatInt(e.Seq, 10)
		switch {
		case e.End == nil:
			s += ":open"
		case e.End.Void:
			s += ":void"
		default:
			s += ":ok"
		}
		if e.Claim == nil || e.Claim.Seq != e.Seq {
			s += ":noclaim"
		}
		got = append(got, s)
	}
	if want := "3:ok 4:void 5:open 6:void"; strings.Join(got, " ") != want {
		t.Errorf("readDecisions = %v, want %s", got, want)
	}
}

func TestReadDecisionsAndCollect(t *testing.T) {
	dir := t.TempDir()
	for seq := int64(1); seq <= 12; seq++ {
		if err := create(dir, decisionName(seq), Claim{Seq: seq, To: "w"}); err != nil {
			t.Fatal(err)
		}
		if seq%2 == 0 {
			if err := create(dir, endName(seq), End{By: "w", At: seq}); err != nil {
				t.Fatal(err)
			}
		}
		if err := create(dir, startName(seq), StartClaim{Seq: seq, By: "w"}); err != nil {
			t.Fatal(err)
		}
	}
	// Foreign and malformed names are ignored.
	for _, n := range []string{"d.x", "d.0", "d.-1", "d.3.ok.bak", "notes", admitLock, "s.1.ok"} {
		os.WriteFile(filepath.Join(dir, n), []byte("{}"), 0o600)
	}
	os.WriteFile(filepath.Join(dir, "d.13"), []byte("torn"), 0o600) // unreadable: skipped
	old := filepath.Join(dir, tmpPrefix+"old")
	os.WriteFile(old, nil, 0o600)
	os.Chtimes(old, time.Now().Add(-time.Hour), time.Now().Add(-time.Hour))
	fresh := filepath.Join(dir, tmpPrefix+"fresh")
	os.WriteFile(fresh, nil, 0o600)

	collect(dir, decisionPrefix, 12)
	if got, want := decisionNames(t, dir), "d.10 d.10.ok d.11 d.12 d.12.ok d.13 d.5 d.6 d.6.ok d.7 d.8 d.8.ok d.9"; got != want {
		t.Errorf("after collect(12): %s, want the newest %d seqs: %s", got, Keep, want)
	}
	starts, _ := readStarts(dir, time.Now())
	if len(starts) != 12 {
		t.Errorf("collecting decisions removed start claims: %d left", len(starts))
	}
	collect(dir, startPrefix, 12)
	if starts, _ = readStarts(dir, time.Now()); len(starts) != Keep || starts[0].Seq != 5 {
		t.Errorf("start claims after collect: %+v", starts)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Error("a temporary file older than a minute must be removed")
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Error("a fresh temporary file (being written) must stay")
	}
	if n := newest(dir, decisionPrefix); n != 13 {
		t.Errorf("newest = %d, want 13 (names count even when unreadable)", n)
	}
}

// TestReadStartsReadsFromTheNewest: a start reads the newest valid claim
// and whatever lies above it (void, torn, from the future), never the
// older claims, which cannot matter; and Blocking decides on that as it
// would on every claim.
func TestReadStartsReadsFromTheNewest(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	claim := func(seq int64, by string, at time.Time) {
		t.Helper()
		if err := create(dir, startName(seq), StartClaim{Seq: seq, By: by, At: at.UnixNano(), SettleSeconds: 5}); err != nil {
			t.Fatal(err)
		}
	}
	for seq := int64(1); seq <= 9; seq++ {
		claim(seq, "other", now.Add(-time.Duration(10-seq)*time.Millisecond))
	}
	// An older claim that cannot be read at all: reading every claim
	// would report it as void.
	if err := os.Mkdir(filepath.Join(dir, startName(10)), 0o700); err != nil {
		t.Fatal(err)
	}
	claim(11, "me", now)
	os.WriteFile(filepath.Join(dir, startName(12)), []byte("torn"), 0o600)
	claim(13, "future", now.Add(time.Hour))

	got, err := readStarts(dir, now)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for _, c := range got {
		seqs = append(seqs, c.Seq)
	}
	if !slices.Equal(seqs, []int64{11, 12, 13}) || got[0].By != "me" || !got[1].Void || got[2].Void {
		t.Fatalf("readStarts = %+v, want the newest valid claim (11) and the two above it", got)
	}
	if b, next := Blocking(got, "me", now); b != nil || next != 14 {
		t.Errorf("Blocking = %+v, %d; want nothing (our own claim is the newest valid), next 14", b, next)
	}
	// With our claim gone, the newest valid one is another tenant's, young:
	// it blocks, as it would among all claims.
	os.Remove(filepath.Join(dir, startName(11)))
	got, _ = readStarts(dir, now)
	if b, next := Blocking(got, "me", now); b == nil || b.Seq != 9 || next != 14 {
		t.Errorf("Blocking = %+v, %d; want claim 9 of other, next 14", b, next)
	}
}
