package gpu

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/internal/regfile"
)

// TestSimFIFO: a FIFO in a simulated device's dir counts as 0, as any
// unreadable file does, instead of blocking every sample of every
// instance sharing the dir; `sim xid` refuses a FIFO as the event file
// instead of waiting for a reader.
func TestSimFIFO(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "0", "tenant"), "1000\n")
	if err := syscall.Mkfifo(filepath.Join(dir, "0", "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := readSimDevice(filepath.Join(dir, "0"), 0)
	if err != nil || r.used != 1000 {
		t.Errorf("used %d, %v; want 1000 (the FIFO counts 0)", r.used, err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "0", SimXidFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := SimXid(dir, 0, 79, time.Now()); !errors.Is(err, regfile.ErrNotRegular) {
		t.Errorf("SimXid: %v, want %v", err, regfile.ErrNotRegular)
	}
}
