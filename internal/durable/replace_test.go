package durable

import (
	"os"
	"path/filepath"
	"testing"
)

// TestReplace: the new content and mode replace the file, a symlink at
// path is replaced and its target left alone, no temporary file stays,
// and a failed write leaves nothing behind.
func TestReplace(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "page.html")
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	for _, sync := range []bool{true, false} {
		if err := Replace(path, []byte("new"), 0o644, sync); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Lstat(path)
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o644 {
			t.Fatalf("sync %v: %v %v, want a regular 0644 file", sync, fi.Mode(), err)
		}
		if b, _ := os.ReadFile(path); string(b) != "new" {
			t.Errorf("sync %v: content %q", sync, b)
		}
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Errorf("the symlink's target was written: %q", b)
	}
	if err := Replace(filepath.Join(dir, "missing", "x"), []byte("x"), 0o644, true); err == nil {
		t.Error("a write into a missing directory succeeded")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("entries %v, want target and page.html only", entries)
	}
}
