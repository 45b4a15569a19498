package cmd

import (
	"errors"
	"strings"
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

// TestLineLog: run's and door's log lines are one line each after their
// prefix, with what they quote escaped (a %-verb in an instance's text is
// an argument, not a format).
func TestLineLog(t *testing.T) {
	var b strings.Builder
	logf := lineLog(&b, "gpuguard door: ")
	logf("instance %q does not answer: %s", "a", "bad reply: \x1b[31m%d\nsecond")
	want := `gpuguard door: instance "a" does not answer: bad reply: \x1b[31m%d\nsecond` + "\n"
	if b.String() != want {
		t.Errorf("logged %q, want %q", b.String(), want)
	}
}
