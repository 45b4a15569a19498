package statefile

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gpuguard/gpuguard/api"
)

// prepared waits for the preparation after w's last write.
func prepared(w *Writer) {
	w.mu.Lock()
	w.wait()
	w.mu.Unlock()
}

// TestWriterPreparesTheNextWrite: after a write, the next write's temp file
// is made and the current file is held by a second link, so the next
// write's rename neither creates nor frees an inode; it puts that temp
// file in place. Close leaves the state file alone.
func TestWriterPreparesTheNextWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	w := NewWriter()
	for seq := 1; seq <= 3; seq++ {
		if err := w.Write(path, api.ProfileState{Seq: seq, Profile: "p"}); err != nil {
			t.Fatal(err)
		}
		if st, err := Read(path); err != nil || st.Seq != seq {
			t.Fatalf("write %d: read %+v, %v", seq, st, err)
		}
		prepared(w)
		cur, _ := os.Lstat(path)
		held, err := os.Lstat(heldName(path))
		if err != nil || !os.SameFile(cur, held) {
			t.Fatalf("write %d: the state file is not held by %s: %v", seq, heldName(path), err)
		}
		if w.spare == nil || !strings.HasPrefix(filepath.Base(w.spare.Name()), ".state.json.tmp-") {
			t.Fatalf("write %d: no temp file made for the next write", seq)
		}
		spare, _ := os.Lstat(w.spare.Name())
		if fi, _ := os.Stat(w.spare.Name()); fi.Mode().Perm() != 0o600 {
			t.Errorf("spare mode %v, want 0600", fi.Mode().Perm())
		}
		if seq < 3 {
			if err := w.Write(path, api.ProfileState{Seq: seq + 1}); err != nil {
				t.Fatal(err)
			}
			if now, _ := os.Lstat(path); !os.SameFile(now, spare) {
				t.Fatalf("write %d did not rename the prepared temp file into place", seq+1)
			}
			seq++
			prepared(w)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := names(t, dir); !slices.Equal(got, []string{"state.json"}) {
		t.Errorf("after Close the dir holds %v, want only the state file", got)
	}
	if st, err := Read(path); err != nil || st.Seq != 3 {
		t.Errorf("after Close: %+v, %v", st, err)
	}
}

// TestWriterSpareTakenAway: a prepared temp file that someone removed, or
// replaced by a symlink, is not used: the write makes a new one and the
// link's target is untouched.
func TestWriterSpareTakenAway(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	w := NewWriter()
	defer w.Close()
	for i, spoil := range []func(name string){
		func(name string) { os.Remove(name) },
		func(name string) { os.Remove(name); os.Symlink(target, name) },
	} {
		if err := w.Write(path, api.ProfileState{Seq: 2 * i}); err != nil {
			t.Fatal(err)
		}
		prepared(w)
		spoil(w.spare.Name())
		if err := w.Write(path, api.ProfileState{Seq: 2*i + 1}); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if st, err := Read(path); err != nil || st.Seq != 2*i+1 {
			t.Errorf("case %d: read %+v, %v", i, st, err)
		}
		if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("case %d: state file %v, %v; want a regular file", i, fi.Mode(), err)
		}
		if b, _ := os.ReadFile(target); string(b) != "precious" {
			t.Errorf("case %d: the link's target now holds %q", i, b)
		}
	}
}

// TestWriterReaderNeverSeesPartialFile: as for Write, every read between
// the Writer's writes is a complete file, in order; and writes from many
// goroutines are serialised.
func TestWriterReaderNeverSeesPartialFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	w := NewWriter()
	if err := w.Write(path, api.ProfileState{Seq: 0}); err != nil {
		t.Fatal(err)
	}
	const writers, each = 4, 100
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range each {
				if err := w.Write(path, api.ProfileState{Seq: 1 + g*each + i, Reason: "r"}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for reads := 0; ; reads++ {
		select {
		case <-done:
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if got := names(t, dir); !slices.Equal(got, []string{"state.json"}) {
				t.Errorf("dir holds %v", got)
			}
			t.Logf("%d reads", reads)
			return
		default:
		}
		if _, err := Read(path); err != nil {
			t.Fatalf("read %d: %v", reads, err)
		}
	}
}

// TestWriterOtherPath: a write to another path drops what was prepared
// for the first, and Close removes what was prepared for the second.
func TestWriterOtherPath(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	w := NewWriter()
	if err := w.Write(filepath.Join(a, "state.json"), api.ProfileState{Seq: 1}); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(filepath.Join(b, "state.json"), api.ProfileState{Seq: 1}); err != nil {
		t.Fatal(err)
	}
	prepared(w)
	if got := names(t, a); !slices.Equal(got, []string{"state.json"}) {
		t.Errorf("first dir holds %v", got)
	}
	w.Close()
	if got := names(t, b); !slices.Equal(got, []string{"state.json"}) {
		t.Errorf("second dir holds %v", got)
	}
}
