package journal

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/internal/regfile"
)

// TestFIFORefused: a FIFO where the journal belongs is refused, by the
// writer and by Read (report), instead of blocking until someone opens
// its other end: gpuguard's start hung there, and, with a reader that
// stops reading, its last flush and so its exit.
func TestFIFORefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if j, err := Open(path, Options{Logf: t.Logf}); !errors.Is(err, regfile.ErrNotRegular) {
		if j != nil {
			j.Close()
		}
		t.Errorf("Open: %v, want %v", err, regfile.ErrNotRegular)
	}
	if _, _, err := Read(path, time.Time{}); !errors.Is(err, regfile.ErrNotRegular) {
		t.Errorf("Read: %v, want %v", err, regfile.ErrNotRegular)
	}
}

// TestSymlinkNotFollowed: a symlink where the journal belongs is refused,
// and the file it points to is never written (before, gpuguard appended
// its lines to wherever the link pointed, as root a root-owned file).
func TestSymlinkNotFollowed(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "events.jsonl")
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	if j, err := Open(path, Options{Logf: t.Logf}); !errors.Is(err, regfile.ErrNotRegular) {
		if j != nil {
			j.Close()
		}
		t.Errorf("Open: %v, want %v", err, regfile.ErrNotRegular)
	}
	if b, _ := os.ReadFile(target); string(b) != "precious\n" {
		t.Errorf("the link's target now holds %q", b)
	}
}
