// Package testbin is what the tests that run the real binary share (e2e and
// bench): building it, and a buffer its stderr can be written to while a
// test reads it.
package testbin

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

// The variables that name a binary built before the tests ran, so that the
// packages and test modules that run gpuguard share one build of each kind
// instead of each building its own (scripts/test.sh builds both first).
// BinEnv is a plain build, as shipped; RaceBinEnv one with the race
// detector.
const (
	BinEnv     = "GPUGUARD_BIN"
	RaceBinEnv = "GPUGUARD_RACE_BIN"
)

// Binary is the gpuguard to test: the one the variable for its kind names
// (BinEnv, RaceBinEnv), else one built from the main package pkg into dir.
// race chooses the race detector (the e2e tests); benchmarks and memory
// figures measure the binary as shipped.
func Binary(dir, pkg string, race bool) (string, error) {
	name, file := BinEnv, "gpuguard"
	if race {
		name, file = RaceBinEnv, "gpuguard-race"
	}
	if p := os.Getenv(name); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s names a binary that cannot be used: %w", name, err)
		}
		return filepath.Abs(p)
	}
	out := filepath.Join(dir, file)
	if err := Build(out, pkg, race); err != nil {
		return "", err
	}
	return out, nil
}

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
