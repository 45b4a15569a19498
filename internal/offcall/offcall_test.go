package offcall

import (
	"errors"
	"testing"
)

// TestGo: the result arrives, and a caller that never reads it leaves no
// goroutine blocked (the channel is buffered).
func TestGo(t *testing.T) {
	errX := errors.New("x")
	r := <-Go(func() (int, error) { return 7, errX })
	if r.V != 7 || !errors.Is(r.Err, errX) {
		t.Errorf("Go = %+v, want 7, x", r)
	}
	done := make(chan struct{})
	_ = Go(func() (int, error) { defer close(done); return 1, nil })
	<-done // it returned without anyone reading its result
}
