package status

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/gpuguard/gpuguard/gpu"
)

// frames hands each write to the test, so it sees what a reader sees.
type frames chan string

func (f frames) Write(p []byte) (int, error) { f <- string(p); return len(p), nil }

func missingGatherer(t *testing.T) *Gatherer {
	g := New(Options{Name: "llama", Dirs: []string{t.TempDir()}, Timeout: ProbeTimeout, ErrOut: io.Discard,
		Open: func() (gpu.Probe, error) { return nil, errors.New("no backend in this test") }})
	t.Cleanup(func() { g.Close() })
	return g
}

// TestShowOnceMissing: printed once, a NAME with no socket is an error and
// nothing is printed.
func TestShowOnceMissing(t *testing.T) {
	var out strings.Builder
	_, err := Show(context.Background(), missingGatherer(t), ShowOptions{Out: &out})
	var missing *NoSuchInstance
	if !errors.As(err, &missing) || out.Len() != 0 {
		t.Fatalf("Show = %v, printed %q; want NoSuchInstance and nothing", err, out.String())
	}
}

// TestShowWatchMissing: watching, a NAME with no socket shows no instance
// ("No running instances.") and the refreshes go on, each one whole write, clearing the screen on a
// terminal; it ends without error when ctx ends.
func TestShowWatchMissing(t *testing.T) {
	f := make(frames)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := Show(ctx, missingGatherer(t), ShowOptions{Out: f, Watch: 1, Terminal: true})
		done <- err
	}()
	for range 2 {
		var fr string
		select {
		case fr = <-f:
		case err := <-done:
			t.Fatalf("Show ended while watching: %v", err)
		}
		if !strings.HasPrefix(fr, "\x1b[H\x1b[2J") || !strings.Contains(fr, "No running instances.") {
			t.Fatalf("frame %q: want a cleared screen and no instance", fr)
		}
	}
	cancel()
	for {
		select {
		case <-f:
		case err := <-done:
			if err != nil {
				t.Fatalf("Show = %v", err)
			}
			return
		}
	}
}
