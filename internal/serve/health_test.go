package serve

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestHealthCadence: polls every 250 ms until the first 2xx (which opens
// the gate and is reported once), then every 5 s; three failures in a row
// close the gate, and the next 2xx opens it again without a second report.
func TestHealthCadence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var at []time.Duration
		answers := []bool{false, false, false, true, true, false, false, false, true}
		start := time.Now()
		var healthy []int
		d := New(Config{Upstream: "http://child", Health: "/health", Priority: P0}, Options{
			Check: func(ctx context.Context, url string) error {
				mu.Lock()
				defer mu.Unlock()
				if url != "http://child/health" {
					t.Errorf("checked %s", url)
				}
				at = append(at, time.Since(start))
				i := len(at) - 1
				if i < len(answers) && answers[i] {
					return nil
				}
				return errors.New("refused")
			},
			OnHealthy: func(gen int) { healthy = append(healthy, gen) },
		})
		d.Launched(7)
		// (the first check is at once)
		time.Sleep(751 * time.Millisecond)
		synctest.Wait()
		if !d.Ready() || len(healthy) != 1 || healthy[0] != 7 {
			t.Fatalf("after 4 checks: ready %v, healthy %v", d.Ready(), healthy)
		}
		time.Sleep(5 * time.Second) // 5th check: ok
		synctest.Wait()
		time.Sleep(10 * time.Second) // 6th, 7th: fail, still ready
		synctest.Wait()
		if !d.Ready() {
			t.Fatal("not ready after two failures")
		}
		time.Sleep(5 * time.Second) // 8th: the third failure in a row
		synctest.Wait()
		if d.Ready() {
			t.Fatal("ready after three failures in a row")
		}
		time.Sleep(250 * time.Millisecond) // 9th, at the short period again: ok
		synctest.Wait()
		if !d.Ready() || len(healthy) != 1 {
			t.Fatalf("ready %v healthy %v after the next 2xx", d.Ready(), healthy)
		}
		d.Unready()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = d.Close(ctx)
		want := []time.Duration{0, 250 * time.Millisecond, 500 * time.Millisecond, 750 * time.Millisecond,
			5750 * time.Millisecond, 10750 * time.Millisecond, 15750 * time.Millisecond, 20750 * time.Millisecond,
			21000 * time.Millisecond}
		mu.Lock()
		defer mu.Unlock()
		if len(at) != len(want) {
			t.Fatalf("checks at %v, want %v", at, want)
		}
		for i := range want {
			if at[i] != want[i] {
				t.Fatalf("checks at %v, want %v", at, want)
			}
		}
	})
}

// TestStaleHealth: an answer for a launch no longer polled (the child
// exited, a drain began) opens nothing.
func TestStaleHealth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		d := New(Config{Upstream: "http://child", Health: "/health", Priority: P0}, Options{
			Check: func(ctx context.Context, url string) error {
				<-release // in flight while the drain begins
				return nil
			},
		})
		d.Launched(1)
		synctest.Wait()
		<-d.Drain()
		close(release)
		synctest.Wait()
		if d.Ready() {
			t.Fatal("a health answer that came after the drain opened the gate")
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = d.Close(ctx)
	})
}
