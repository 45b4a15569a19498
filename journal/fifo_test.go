package journal

import (
	"errors"
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
