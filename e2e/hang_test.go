package e2e

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Hangs outside gpuguard (a driver call that never returns, a FIFO where a
// file was expected) must not hang gpuguard's commands for ever.

// hungCounter makes the first fake DRM GPU's memory counter a FIFO that
// nobody writes, so that opening it blocks, as a read of a sick driver's
// file can, and returns its path.
func hungCounter(t *testing.T, sysfs string) string {
	t.Helper()
	used := filepath.Join(sysfs, "class/drm/card1/device/mem_info_vram_used")
	if err := os.Remove(used); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(used, 0o644); err != nil {
		t.Fatal(err)
	}
	return used
}

// TestRunHungBackendOpen: `run` whose backend never finishes opening (the
// DRM discovery blocks on the FIFO counter, as nvmlInit can in a hung
// driver) keeps waiting, since a large host's first NVML call can take
// seconds, but says so on stderr every 10 s, and a SIGTERM then ends it
// at once with 143 (a stop while no child runs), its socket and lock removed.
func TestRunHungBackendOpen(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	env, sysfs := drmTree(t, e)
	hungCounter(t, sysfs)
	p := e.start([]string{"run", "--name", "hung", "--backend", "drm", "--", "true"}, env...)
	waitFor(t, "the notice", 30*time.Second, func() bool {
		return strings.Contains(p.stderr.String(), "still opening the GPU backend after 10s (is the driver hung?)")
	})
	p.signal(syscall.SIGTERM)
	if code := p.wait(); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("exit %d, want 143; stderr:\n%s", code, p.stderr.String())
	}
	if p.cmd.ProcessState.Sys().(syscall.WaitStatus).Signaled() {
		t.Errorf("gpuguard died of the signal instead of exiting 143: nothing of it was cleaned up")
	}
	for _, f := range []string{"hung.sock", "hung.lock"} {
		if _, err := os.Lstat(filepath.Join(e.runDir, f)); !os.IsNotExist(err) {
			t.Errorf("%s left behind: %v", f, err)
		}
	}
}

// TestStatusHungBackend: a backend call that never returns does not hang
// `gpuguard status`. Here the memory counter is a FIFO that nobody writes,
// so opening it blocks, as a read of a sick driver's file or an NVML call
// on a GPU falling off the bus can. After 2 s status answers without GPUs,
// with a warning, and exits 0: first when the backend's discovery blocks,
// then, with one writer letting discovery through, when the reading does.
func TestStatusHungBackend(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	env, sysfs := drmTree(t, e)
	used := hungCounter(t, sysfs)
	status := func(wantWarning string) {
		t.Helper()
		code, out, stderr := e.run([]string{"status", "--json", "--backend", "drm", "--runtime-dir", e.runDir}, env...)
		var r struct {
			GPUs []any `json:"gpus"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &r) != nil || r.GPUs == nil || len(r.GPUs) != 0 {
			t.Errorf("status with a hung backend: exit %d, want 0 and no GPUs\n%s%s", code, out, stderr)
		}
		if !strings.Contains(stderr, wantWarning+": no answer within 2s") {
			t.Errorf("stderr %q, want %q: no answer within 2s", stderr, wantWarning)
		}
	}
	status("no GPU information: opening the GPU backend")

	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		if f, err := os.OpenFile(used, os.O_WRONLY, 0); err == nil { // blocks until discovery opens it
			f.WriteString(strconv.Itoa(1<<30) + "\n")
			f.Close()
		}
	}()
	status("reading GPUs")
	// Let the writer go if discovery never opened the counter: its data
	// then comes here, and the reading was not what hung.
	f, err := os.OpenFile(used, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	<-wrote
	if b, _ := io.ReadAll(f); len(b) != 0 {
		t.Error("discovery never read the counter: the reading was not what hung")
	}
}

// TestRunJournalFIFO: an events.jsonl that is a FIFO nobody reads (the
// journal's open would block for ever) makes `run` fail at once with exit
// 1 and an error naming it, before any child starts.
func TestRunJournalFIFO(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if err := os.MkdirAll(e.stateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(e.stateDir, "events.jsonl"), 0o600); err != nil {
		t.Fatal(err)
	}
	started := e.path("started")
	code, _, stderr := e.run(append([]string{"run", "--backend", "sim", "--name", "fifo"}, sh(`touch "$1"`, started)...))
	if code != 1 || !strings.Contains(stderr, "opening the event journal") || !strings.Contains(stderr, "not a regular file (a FIFO)") {
		t.Errorf("exit %d, want 1 naming the journal as a FIFO; stderr:\n%s", code, stderr)
	}
	if _, err := os.Stat(started); err == nil {
		t.Error("a child was started")
	}
}
