package gpu

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

func TestSimSet(t *testing.T) {
	dir := t.TempDir()
	s, err := NewSim(SimOptions{Dir: dir, Devices: 2})
	if err != nil {
		t.Fatal(err)
	}
	used := func(i int) uint64 {
		t.Helper()
		smp, err := s.Sample(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return smp.Devices[i].Used
	}
	if err := SimSet(dir, 1, "other", 5<<30); err != nil {
		t.Fatal(err)
	}
	if err := SimSet(dir, 1, strconv.Itoa(os.Getpid()), 1<<30); err != nil {
		t.Fatal(err)
	}
	if got := used(1); got != 6<<30 {
		t.Errorf("used after two sets = %d, want %d", got, uint64(6<<30))
	}
	if err := SimSet(dir, 1, "other", 2); err != nil {
		t.Fatal(err)
	}
	if got := used(1); got != 1<<30+2 {
		t.Errorf("used after overwrite = %d, want %d", got, uint64(1<<30+2))
	}
	b, err := os.ReadFile(filepath.Join(dir, "1", "other"))
	if err != nil || string(b) != "2\n" {
		t.Errorf("file holds %q, %v; want \"2\\n\"", b, err)
	}
	for _, name := range []string{"other", strconv.Itoa(os.Getpid()), "never-set"} {
		if err := SimSet(dir, 1, name, 0); err != nil {
			t.Errorf("SimSet(%q, 0): %v", name, err)
		}
	}
	if got := used(1); got != 0 {
		t.Errorf("used after removal = %d, want 0", got)
	}
	ents, _ := os.ReadDir(filepath.Join(dir, "1"))
	if len(ents) != 0 {
		t.Errorf("device dir not empty after removal: %v", ents)
	}
}

func TestSimSetCreatesDeviceDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new")
	if err := SimSet(dir, 3, "x", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "3", "x")); err != nil {
		t.Error(err)
	}
}

func TestSimSetRejects(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"", ".hidden", "a/b", "../x", "a\x00b"} {
		if err := SimSet(dir, 0, name, 1); err == nil {
			t.Errorf("SimSet name %q succeeded, want an error", name)
		}
	}
	if err := SimSet(dir, -1, "x", 1); err == nil {
		t.Error("SimSet GPU -1 succeeded, want an error")
	}
}
