package statefile

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// names lists the entries of dir.
func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	st := api.ProfileState{Seq: 3, Level: 1, Profile: "int8", Env: map[string]string{"DTYPE": "int8", "Q": `"x" \ y`}, Reason: "watermark 0.93 > 0.90"}
	if err := Write(path, st); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, st) {
		t.Errorf("got %+v, want %+v", got, st)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
}

func TestContractFields(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	if err := Write(path, api.ProfileState{Type: "profile", Profile: "fp16"}); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if want := []string{"env", "level", "profile", "reason", "seq"}; !slices.Equal(keys, want) {
		t.Errorf("keys %v, want %v", keys, want)
	}
	if env, ok := m["env"].(map[string]any); !ok || len(env) != 0 {
		t.Errorf("nil env written as %v, want {}", m["env"])
	}
}

func TestReplacesLooserFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, api.ProfileState{Seq: 1}); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
}

// TestReaderNeverSeesPartialFile reads in a loop while 1000 writes (100
// with -short)
// replace the file: every read must be complete JSON, in order.
func TestReaderNeverSeesPartialFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	big := map[string]string{}
	for i := range 200 { // a few KiB, so a torn write would show
		big[string(rune('a'+i%26))+string(rune('a'+i/26))] = "some value to make the file larger than one page"
	}
	if err := Write(path, api.ProfileState{Seq: 0, Env: big}); err != nil {
		t.Fatal(err)
	}
	const writes = 1000
	done := make(chan error)
	go func() {
		for i := 1; i <= writes; i++ {
			if err := Write(path, api.ProfileState{Seq: i, Env: big, Reason: "r"}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	last, reads := 0, 0
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			if st, err := Read(path); err != nil || st.Seq != writes {
				t.Errorf("final read: seq %d, %v", st.Seq, err)
			}
			t.Logf("%d reads", reads)
			if got := names(t, dir); !slices.Equal(got, []string{"state.json"}) {
				t.Errorf("dir holds %v", got)
			}
			return
		default:
		}
		st, err := Read(path)
		if err != nil {
			t.Fatalf("read %d: %v", reads, err)
		}
		if st.Seq < last || len(st.Env) != len(big) {
			t.Fatalf("read %d: seq %d after %d, %d env entries", reads, st.Seq, last, len(st.Env))
		}
		last = st.Seq
		reads++
	}
}

func TestFailedWriteLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	if err := os.Mkdir(path, 0o700); err != nil { // rename onto a directory fails
		t.Fatal(err)
	}
	if err := Write(path, api.ProfileState{Seq: 1}); err == nil {
		t.Fatal("write over a directory succeeded")
	}
	if got := names(t, dir); !slices.Equal(got, []string{"state.json"}) {
		t.Errorf("dir holds %v", got)
	}
	if err := Write(filepath.Join(dir, "missing", "state.json"), api.ProfileState{}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing dir: %v", err)
	}
}

func TestStaleTempsRemoved(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	stale := filepath.Join(dir, ".state.json.tmp-123")
	fresh := filepath.Join(dir, ".state.json.tmp-456")
	other := filepath.Join(dir, ".other.json.tmp-789")
	for _, p := range []string{stale, fresh, other} {
		if err := os.WriteFile(p, []byte("{"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-time.Hour)
	os.Chtimes(stale, old, old)
	os.Chtimes(other, old, old)
	if err := Write(path, api.ProfileState{Seq: 1}); err != nil {
		t.Fatal(err)
	}
	want := []string{".other.json.tmp-789", ".state.json.tmp-456", "state.json"}
	if got := names(t, dir); !slices.Equal(got, want) {
		t.Errorf("dir holds %v, want %v", got, want)
	}
}

func TestReadErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Read(filepath.Join(dir, "none")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
	bad := filepath.Join(dir, "bad")
	os.WriteFile(bad, []byte(`{"seq":`), 0o600)
	if _, err := Read(bad); err == nil {
		t.Error("truncated JSON read without error")
	}
}

// TestWriteKeepsReasonReadable: the reason is written as people read it
// ("watermark 0.94 > 0.90"), not HTML-escaped, so grep finds it.
func TestWriteKeepsReasonReadable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	if err := Write(path, api.ProfileState{Seq: 1, Profile: "int8", Reason: "watermark 0.94 > 0.90"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"reason":"watermark 0.94 > 0.90"`) {
		t.Fatalf("state file %s", b)
	}
}

// TestLinkNotFollowed: a symlink where the state file belongs is replaced
// by the state file (0600); the file it pointed to is not written.
func TestLinkNotFollowed(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "state.json")
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, api.ProfileState{Seq: 1, Profile: "fp16"}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "precious" {
		t.Errorf("the link's target now holds %q", b)
	}
	if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Errorf("state file %v, %v; want a 0600 file", fi.Mode(), err)
	}
}

// TestWriterSweepsOnce: a Writer removes stale temps at its first write
// and lists the dir no more after that (a restart writes before every
// fork); what its own writes leave is nothing.
func TestWriterSweepsOnce(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	old := time.Now().Add(-time.Hour)
	stale := func(name string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("{"), 0o600); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(p, old, old)
	}
	stale(".state.json.tmp-1")
	var w Writer
	if err := w.Write(path, api.ProfileState{Seq: 1}); err != nil {
		t.Fatal(err)
	}
	if got := names(t, dir); !slices.Equal(got, []string{"state.json"}) {
		t.Fatalf("after the first write the dir holds %v", got)
	}
	stale(".state.json.tmp-2")
	for seq := 2; seq <= 5; seq++ {
		if err := w.Write(path, api.ProfileState{Seq: seq}); err != nil {
			t.Fatal(err)
		}
	}
	if got := names(t, dir); !slices.Equal(got, []string{".state.json.tmp-2", "state.json"}) {
		t.Errorf("later writes swept (or left temps): the dir holds %v", got)
	}
	if st, err := Read(path); err != nil || st.Seq != 5 {
		t.Errorf("read back %+v, %v", st, err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, %v", fi.Mode(), err)
	}
}

// TestWriterHoldsTheReplacedFile: a Writer's write keeps the replaced
// file open across the rename (so that the rename does not free its inode
// on the caller's goroutine), and every descriptor it held is closed
// soon after: after 50 writes the process has none more than before.
func TestWriterHoldsTheReplacedFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	if fd := holdOld(path, true); fd != -1 {
		t.Errorf("held a file that is not there: %d", fd)
	}
	if err := Write(path, api.ProfileState{Seq: 1}); err != nil {
		t.Fatal(err)
	}
	if fd := holdOld(path, false); fd != -1 {
		t.Errorf("held with hold unset: %d", fd)
	}
	fd := holdOld(path, true)
	if fd < 0 {
		t.Fatal("the state file was not held")
	}
	unix.Close(fd)
	before := openFDs(t)
	var w Writer
	for seq := 2; seq <= 51; seq++ {
		if err := w.Write(path, api.ProfileState{Seq: seq}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for openFDs(t) > before && time.Now().Before(deadline) {
		runtime.Gosched() // the closes run on goroutines of their own
	}
	if n := openFDs(t); n > before {
		t.Errorf("%d descriptors open after 50 writes, %d before", n, before)
	}
}

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	return len(names(t, "/proc/self/fd"))
}
