// Package testbin is what the tests that run the real binary share (e2e and
// bench): building it, and a buffer its stderr can be written to while a
// test reads it.
package testbin

import (
	"bytes"
	"os"
	"os/exec"
	"sync"
)

// Build compiles the main package pkg into out, its output to stderr. race
// builds with the race detector (the e2e tests); benchmarks measure the
// binary as shipped.
func Build(out, pkg string, race bool) error {
	args := []string{"build", "-o", out}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}

// Buffer is a bytes.Buffer safe for a writer goroutine and a reader.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Tail is the last n bytes, enough to explain a failure.
func (b *Buffer) Tail(n int) string {
	s := b.String()
	if len(s) > n {
		s = "..." + s[len(s)-n:]
	}
	return s
}
