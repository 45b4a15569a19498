package open

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpuguard/gpuguard/gpu"
)

// TestAwait: an opening that never returns is waited for, with a
// notice every 10 s, until a stop signal ends the wait with *Stopped (the
// command exits 128+signal: cmd's TestStoppedOpenExits);
// one that returns is returned, error included.
func TestAwait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logged []string
		logf := func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }
		hung := make(chan struct{})
		defer close(hung) // lets the abandoned opening end with the bubble
		signals := make(chan os.Signal, 1)
		type result struct {
			p   gpu.Probe
			err error
		}
		done := make(chan result, 1)
		go func() {
			p, err := Await(func() (gpu.Probe, error) { <-hung; return nil, errors.New("late") }, signals, logf)
			done <- result{p, err}
		}()
		time.Sleep(25 * time.Second)
		synctest.Wait()
		want := []string{
			"still opening the GPU backend after 10s (is the driver hung?)",
			"still opening the GPU backend after 20s (is the driver hung?)",
		}
		if strings.Join(logged, "\n") != strings.Join(want, "\n") {
			t.Errorf("after 25 s, logged %q, want %q", logged, want)
		}
		signals <- syscall.SIGTERM
		r := <-done
		var st *Stopped
		if !errors.As(r.err, &st) || st.Signal != syscall.SIGTERM || r.p != nil {
			t.Errorf("after SIGTERM: %v, %v; want *Stopped by SIGTERM", r.p, r.err)
		}
		if last := logged[len(logged)-1]; last != "stopped by SIGTERM while opening the GPU backend" {
			t.Errorf("last line %q", last)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		want := errors.New("no NVML")
		_, err := Await(func() (gpu.Probe, error) { return nil, want }, nil, t.Logf)
		if err != want {
			t.Errorf("err %v, want %v", err, want)
		}
	})
}
