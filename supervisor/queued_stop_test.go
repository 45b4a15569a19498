package supervisor

import (
	"context"
	"os"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// gatedWatchdog is a Notifier whose first Watchdog, which Run calls just
// before its loop, waits until the first sample has been taken (every
// other goroutine of the bubble is blocked): the loop then starts with a
// sample and a queued stop both ready, as in `run` when the stop came
// while the backend was opening.
type gatedWatchdog struct{ fakeNotifier }

func (n *gatedWatchdog) WatchdogInterval() time.Duration { return time.Hour }
func (n *gatedWatchdog) Watchdog() error {
	if n.add("WATCHDOG"); n.count("WATCHDOG") == 1 {
		synctest.Wait()
	}
	return nil
}

// TestStopQueuedBeforeRun: gpuguard listens for stop signals from before
// the backend opens, and they queue until Run's loop. Such a stop came
// while no child ran: Run exits 128+signal and starts nothing, even when
// the first sample is ready at the same time (a select picks between
// ready cases at random, so this is tried a few times).
func TestStopQueuedBeforeRun(t *testing.T) {
	for range 20 {
		synctest.Test(t, func(t *testing.T) {
			pol := testPolicy()
			launcher := newFakeLauncher()
			rec := &recorder{}
			sup, err := New(Config{Name: "t", Policy: pol, Command: pol.Command, CheckpointPath: "/state/checkpoint",
				StatePath: "/state/state.json", SocketPath: "/run/t.sock", BaseEnv: []string{"PATH=/bin", "MAX_BATCH=1"}},
				Deps{Probe: newFakeProbe(16 * gib), Launcher: launcher, WriteState: rec.writeState, RotateCheckpoint: rec.rotate,
					Observers: []Observer{rec}, Publisher: rec, Logf: t.Logf, Notifier: &gatedWatchdog{}})
			if err != nil {
				t.Fatal(err)
			}
			signals := make(chan os.Signal, 4)
			signals <- syscall.SIGTERM
			code, err := sup.Run(context.Background(), signals)
			if code != 128+int(syscall.SIGTERM) || err != nil {
				t.Errorf("Run = %d, %v; want 143, nil", code, err)
			}
			if n := len(launcher.launched); n != 0 {
				t.Errorf("%d children started after the stop", n)
			}
		})
	}
}
