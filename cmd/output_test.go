package cmd

import (
	"errors"
	"testing"
)

type brokenWriter struct{ n int }

func (b *brokenWriter) Write(p []byte) (int, error) {
	b.n++
	return 0, errors.New("broken pipe")
}

// TestDroppingWriter: a write its reader can no longer take is reported
// as written, and counted.
func TestDroppingWriter(t *testing.T) {
	b := &brokenWriter{}
	d := &droppingWriter{w: b}
	for range 3 {
		if n, err := d.Write([]byte("line\n")); n != 5 || err != nil {
			t.Fatalf("Write = %d, %v; want 5, nil", n, err)
		}
	}
	if d.Dropped() != 3 || b.n != 3 {
		t.Errorf("dropped %d of %d, want 3 of 3", d.Dropped(), b.n)
	}
}
