package supervisor

import (
	"slices"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// fakeNotifier records what the service manager would be told.
type fakeNotifier struct {
	mu   sync.Mutex
	sent []string
}

func (n *fakeNotifier) add(s string) error {
	n.mu.Lock()
	n.sent = append(n.sent, s)
	n.mu.Unlock()
	return nil
}
func (n *fakeNotifier) Ready() error                    { return n.add("READY") }
func (n *fakeNotifier) Status(string) error             { return n.add("STATUS") }
func (n *fakeNotifier) Stopping() error                 { return n.add("STOPPING") }
func (n *fakeNotifier) Watchdog() error                 { return nil }
func (n *fakeNotifier) WatchdogInterval() time.Duration { return 0 }

func (n *fakeNotifier) count(s string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := 0
	for _, x := range n.sent {
		if x == s {
			c++
		}
	}
	return c
}

// TestNotifyReadyOnceStoppingOnce: READY once the first child runs (not
// again after a restart), STOPPING exactly once however gpuguard ends.
func TestNotifyReadyOnceStoppingOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(h *harness, c *fakeChild)
	}{
		{"stop signal", func(h *harness, c *fakeChild) {
			h.signals <- syscall.SIGTERM
			synctest.Wait()
			c.end(Exit{Code: 0})
		}},
		{"child exits 0", func(h *harness, c *fakeChild) { c.end(Exit{Code: 0}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := &fakeNotifier{}
				h := startHarness(t, testPolicy(), func(c *Config, d *Deps) { d.Notifier = n })
				h.child().end(Exit{Code: 1}) // a crash: restarted
				c := h.child()
				tc.end(h, c)
				h.wait()
				if got := []int{n.count("READY"), n.count("STOPPING")}; !slices.Equal(got, []int{1, 1}) {
					t.Fatalf("READY, STOPPING sent %v times, want once each (%v)", got, n.sent)
				}
				if n.count("STATUS") == 0 {
					t.Fatal("no STATUS")
				}
			})
		})
	}
}
