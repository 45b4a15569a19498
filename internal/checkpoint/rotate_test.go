package checkpoint

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o640); err != nil {
		t.Fatal(err)
	}
}

// read returns the content of path, or "<none>" when it does not exist.
func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "<none>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

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

func TestGenerationsShift(t *testing.T) {
	dir := t.TempDir()
	ck := filepath.Join(dir, "checkpoint")
	for i := 1; i <= 5; i++ {
		write(t, ck, "v"+strconv.Itoa(i))
		if err := Rotate(ck, 3); err != nil {
			t.Fatal(err)
		}
		want := []string{"v" + strconv.Itoa(i), "<none>", "<none>", "<none>", "<none>"}
		for g := 1; g <= 3 && i-g+1 >= 1; g++ {
			want[g] = "v" + strconv.Itoa(i-g+1)
		}
		got := []string{read(t, ck)}
		for g := 1; g <= 4; g++ {
			got = append(got, read(t, generation(ck, g)))
		}
		if !slices.Equal(got, want) {
			t.Errorf("rotation %d: got %q, want %q", i, got, want)
		}
	}
	if want := []string{"checkpoint", "checkpoint.1", "checkpoint.2", "checkpoint.3"}; !slices.Equal(names(t, dir), want) {
		t.Errorf("dir holds %v", names(t, dir))
	}
}

func TestOriginalUntouched(t *testing.T) {
	ck := filepath.Join(t.TempDir(), "checkpoint")
	content := string(make([]byte, 3<<20)) + "tail"
	write(t, ck, content)
	mtime := time.Date(2020, 1, 2, 3, 4, 5, 6, time.UTC)
	if err := os.Chtimes(ck, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(ck)
	if err := Rotate(ck, 2); err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(ck)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) || !after.ModTime().Equal(mtime) || after.Mode() != before.Mode() {
		t.Errorf("checkpoint changed: %v %v -> %v %v", before.ModTime(), before.Mode(), after.ModTime(), after.Mode())
	}
	if read(t, ck) != content {
		t.Error("checkpoint content changed")
	}
	gen, err := os.Stat(generation(ck, 1))
	if err != nil {
		t.Fatal(err)
	}
	if read(t, generation(ck, 1)) != content || !gen.ModTime().Equal(mtime) || gen.Mode() != 0o600 {
		t.Errorf("generation 1: mtime %v mode %v", gen.ModTime(), gen.Mode())
	}
}

func TestMissingCheckpointIsNoop(t *testing.T) {
	dir := t.TempDir()
	if err := Rotate(filepath.Join(dir, "checkpoint"), 3); err != nil {
		t.Fatal(err)
	}
	if got := names(t, dir); len(got) != 0 {
		t.Errorf("dir holds %v", got)
	}
}

func TestKeepZero(t *testing.T) {
	dir := t.TempDir()
	ck := filepath.Join(dir, "checkpoint")
	write(t, ck, "new")
	write(t, generation(ck, 1), "old")
	if err := Rotate(ck, 0); err != nil {
		t.Fatal(err)
	}
	if read(t, ck) != "new" || read(t, generation(ck, 1)) != "old" || len(names(t, dir)) != 2 {
		t.Errorf("keep=0 changed something: %v", names(t, dir))
	}
	if err := Rotate(ck, -1); err == nil {
		t.Error("negative keep accepted")
	}
}

func TestGenerationsBeyondKeepLeftAlone(t *testing.T) {
	ck := filepath.Join(t.TempDir(), "checkpoint")
	write(t, ck, "new")
	write(t, generation(ck, 1), "g1")
	write(t, generation(ck, 2), "g2")
	write(t, generation(ck, 5), "g5")
	if err := Rotate(ck, 2); err != nil {
		t.Fatal(err)
	}
	got := []string{read(t, generation(ck, 1)), read(t, generation(ck, 2)), read(t, generation(ck, 3)), read(t, generation(ck, 5))}
	if want := []string{"new", "g1", "<none>", "g5"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// failingWriter fails like a full disk once n bytes have been written.
type failingWriter struct {
	w io.Writer
	n int
}

func (f *failingWriter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		k, _ := f.w.Write(p[:f.n])
		f.n = 0
		return k, syscall.ENOSPC
	}
	f.n -= len(p)
	return f.w.Write(p)
}

func fullDisk(after int) rotator {
	return rotator{wrap: func(w io.Writer) io.Writer { return &failingWriter{w: w, n: after} }}
}

func TestCopyFailureChangesNothing(t *testing.T) {
	dir := t.TempDir()
	ck := filepath.Join(dir, "checkpoint")
	write(t, ck, "current checkpoint")
	write(t, generation(ck, 1), "g1")
	write(t, generation(ck, 2), "g2")
	err := fullDisk(5).rotate(ck, 2)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("got %v, want ENOSPC", err)
	}
	got := []string{read(t, ck), read(t, generation(ck, 1)), read(t, generation(ck, 2))}
	if want := []string{"current checkpoint", "g1", "g2"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if want := []string{"checkpoint", "checkpoint.1", "checkpoint.2"}; !slices.Equal(names(t, dir), want) {
		t.Errorf("dir holds %v", names(t, dir))
	}
}

// makeTree builds a small checkpoint directory.
func makeTree(t *testing.T, root, tag string) {
	t.Helper()
	for _, d := range []string{root, filepath.Join(root, "shards"), filepath.Join(root, "shards", "empty")} {
		if err := os.Mkdir(d, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(root, "meta.json"), `{"tag":"`+tag+`"}`)
	write(t, filepath.Join(root, "shards", "0.bin"), tag+" shard 0")
	if err := os.Chmod(filepath.Join(root, "shards", "0.bin"), 0o400); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("shards/0.bin", filepath.Join(root, "latest")); err != nil {
		t.Fatal(err)
	}
}

// checkTree checks that root holds what makeTree(tag) built; rotated: a
// rotation made it, so its modes are private.
func checkTree(t *testing.T, root, tag string, rotated bool) {
	t.Helper()
	if got := read(t, filepath.Join(root, "meta.json")); got != `{"tag":"`+tag+`"}` {
		t.Errorf("%s: meta.json %q", root, got)
	}
	if got := read(t, filepath.Join(root, "shards", "0.bin")); got != tag+" shard 0" {
		t.Errorf("%s: shard %q", root, got)
	}
	// The checkpoint keeps its modes; a generation is private (0600 files,
	// 0700 dirs).
	fileMode, dirMode := os.FileMode(0o400), os.FileMode(0o750)
	if rotated {
		fileMode, dirMode = 0o600, 0o700
	}
	if fi, err := os.Stat(filepath.Join(root, "shards", "0.bin")); err != nil || fi.Mode().Perm() != fileMode {
		t.Errorf("%s: shard mode %v, %v; want %v", root, fi.Mode(), err, fileMode)
	}
	if fi, err := os.Stat(filepath.Join(root, "shards", "empty")); err != nil || !fi.IsDir() || fi.Mode().Perm() != dirMode {
		t.Errorf("%s: empty dir: %v", root, err)
	}
	if target, err := os.Readlink(filepath.Join(root, "latest")); err != nil || target != "shards/0.bin" {
		t.Errorf("%s: symlink %q, %v", root, target, err)
	}
}

func TestDirectoryCheckpoint(t *testing.T) {
	dir := t.TempDir()
	ck := filepath.Join(dir, "checkpoint")
	for i := 1; i <= 3; i++ {
		os.RemoveAll(ck)
		makeTree(t, ck, "v"+strconv.Itoa(i))
		if err := Rotate(ck+"/", 2); err != nil {
			t.Fatal(err)
		}
	}
	checkTree(t, ck, "v3", false)
	checkTree(t, generation(ck, 1), "v3", true)
	checkTree(t, generation(ck, 2), "v2", true)
	if want := []string{"checkpoint", "checkpoint.1", "checkpoint.2"}; !slices.Equal(names(t, dir), want) {
		t.Errorf("dir holds %v", names(t, dir))
	}
}

func TestDirectoryCopyFailureChangesNothing(t *testing.T) {
	dir := t.TempDir()
	ck := filepath.Join(dir, "checkpoint")
	makeTree(t, ck, "new")
	makeTree(t, generation(ck, 1), "old")
	if err := fullDisk(3).rotate(ck, 2); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("got %v, want ENOSPC", err)
	}
	checkTree(t, ck, "new", false)
	checkTree(t, generation(ck, 1), "old", false)
	if want := []string{"checkpoint", "checkpoint.1"}; !slices.Equal(names(t, dir), want) {
		t.Errorf("dir holds %v", names(t, dir))
	}
}

// TestKindChanges rotates a directory over file generations and back:
// rename cannot put a directory where a file is, nor replace a non-empty
// directory.
func TestKindChanges(t *testing.T) {
	ck := filepath.Join(t.TempDir(), "checkpoint")
	write(t, generation(ck, 1), "file g1")
	makeTree(t, generation(ck, 2), "dir g2")
	makeTree(t, ck, "dir")
	if err := Rotate(ck, 2); err != nil {
		t.Fatal(err)
	}
	checkTree(t, generation(ck, 1), "dir", true)
	if read(t, generation(ck, 2)) != "file g1" {
		t.Error("file generation not shifted")
	}
	os.RemoveAll(ck)
	write(t, ck, "file")
	if err := Rotate(ck, 2); err != nil {
		t.Fatal(err)
	}
	if read(t, generation(ck, 1)) != "file" {
		t.Error("file checkpoint not copied")
	}
	checkTree(t, generation(ck, 2), "dir", true)
}

func TestSymlinkedCheckpointIsFollowed(t *testing.T) {
	dir := t.TempDir()
	ck := filepath.Join(dir, "checkpoint")
	write(t, filepath.Join(dir, "real"), "data")
	if err := os.Symlink("real", ck); err != nil {
		t.Fatal(err)
	}
	if err := Rotate(ck, 1); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(generation(ck, 1))
	if err != nil || !fi.Mode().IsRegular() || read(t, generation(ck, 1)) != "data" {
		t.Errorf("generation: %v, %v", fi, err)
	}
}

func TestUnsupportedKind(t *testing.T) {
	dir := t.TempDir()
	ck := filepath.Join(dir, "checkpoint")
	if err := unix.Mkfifo(ck, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Rotate(ck, 2); err == nil {
		t.Error("rotated a fifo")
	}
	os.Remove(ck)
	os.Mkdir(ck, 0o700)
	if err := unix.Mkfifo(filepath.Join(ck, "pipe"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Rotate(ck, 2); err == nil {
		t.Error("rotated a directory holding a fifo")
	}
	if want := []string{"checkpoint"}; !slices.Equal(names(t, dir), want) {
		t.Errorf("dir holds %v", names(t, dir))
	}
}

func TestLeftoversRemoved(t *testing.T) {
	dir := t.TempDir()
	ck := filepath.Join(dir, "checkpoint")
	write(t, ck, "x")
	os.MkdirAll(filepath.Join(dir, ".checkpoint.rotate-123", "dropped"), 0o700)
	write(t, filepath.Join(dir, ".checkpoint.rotate-456"), "partial")
	write(t, filepath.Join(dir, ".other.rotate-789"), "someone else's")
	if err := Rotate(ck, 1); err != nil {
		t.Fatal(err)
	}
	if want := []string{".other.rotate-789", "checkpoint", "checkpoint.1"}; !slices.Equal(names(t, dir), want) {
		t.Errorf("dir holds %v, want %v", names(t, dir), want)
	}
}

func TestRotateSkipsAnUnchangedCheckpoint(t *testing.T) {
	dir := t.TempDir()
	ck := filepath.Join(dir, "checkpoint")
	write := func(s string, mtime time.Time) {
		t.Helper()
		if err := os.WriteFile(ck, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(ck, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Unix(1_700_000_000, 0)
	write("v1", t0)
	for range 3 { // a crash loop: three restarts, no new checkpoint
		if err := Rotate(ck, 3); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(ck + ".2"); err == nil {
		t.Fatal("an unchanged checkpoint was copied again, pushing generations out with duplicates")
	}
	write("v2", t0.Add(time.Second))
	if err := Rotate(ck, 3); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"": "v2", ".1": "v2", ".2": "v1"} {
		if b, _ := os.ReadFile(ck + name); string(b) != want {
			t.Errorf("checkpoint%s = %q, want %q", name, b, want)
		}
	}
	// Same size and time but the generation was edited by hand: the quick
	// check trusts size and time, as rsync does.
	write("v3", t0.Add(time.Second))
	if err := Rotate(ck, 3); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(ck + ".1"); string(b) != "v2" {
		t.Errorf("checkpoint.1 = %q", b)
	}
}

// TestGenerationsArePrivateAndLinksNotFollowed: a generation is 0600
// whatever the checkpoint's mode (a checkpoint that links to a
// world-readable file left a world-readable copy before), and a link
// planted where a generation goes is moved along or replaced, never
// written through.
func TestGenerationsArePrivateAndLinksNotFollowed(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(dir, "outside")
	write(t, outside, "secret")
	if err := os.Chmod(outside, 0o644); err != nil {
		t.Fatal(err)
	}
	precious := filepath.Join(dir, "precious")
	write(t, precious, "keep me")
	ck := filepath.Join(dir, "checkpoint")
	if err := os.Symlink(outside, ck); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(precious, generation(ck, 1)); err != nil {
		t.Fatal(err)
	}
	if err := Rotate(ck, 3); err != nil {
		t.Fatal(err)
	}
	gen, err := os.Lstat(generation(ck, 1))
	if err != nil || !gen.Mode().IsRegular() || gen.Mode().Perm() != 0o600 {
		t.Fatalf("generation 1: %v, %v; want a 0600 file", gen.Mode(), err)
	}
	if read(t, precious) != "keep me" {
		t.Error("a generation was written through a link")
	}
	if l, err := os.Lstat(generation(ck, 2)); err != nil || l.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the planted link was not moved along as a link: %v, %v", l.Mode(), err)
	}
}
