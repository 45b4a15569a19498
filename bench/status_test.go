package bench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	statusInstances = flag.Int("status.instances", 32, "status: running instances")
	statusRuns      = flag.Int("status.runs", 20, "status: `gpuguard status --json` runs measured")
)

// BenchmarkStatusMany is `gpuguard status --json --runtime-dir D` with 32
// running instances (real binary, sim backend, idle children, distinct
// names and state dirs, one shared runtime dir): command start -> exit,
// with the output checked to list every instance as running.
// Target: <= 100 ms.
func BenchmarkStatusMany(b *testing.B) {
	defer reportLoad(b)()
	var runs []time.Duration
	for b.Loop() {
		s := newSandbox(b)
		pol := s.policy("status", "[watch]\ninterval = \"200ms\"\n")
		guards := make([]*guard, *statusInstances)
		for i := range guards {
			guards[i] = s.start(fmt.Sprintf("inst%02d", i), pol, nil, childBin, "idle")
		}
		var wg sync.WaitGroup
		for _, g := range guards {
			wg.Go(func() { g.running(context.Background()).Close() })
		}
		wg.Wait()

		runs = runs[:0]
		for range *statusRuns {
			cmd := exec.Command(bin, "status", "--json", "--runtime-dir", s.runDir)
			t0 := time.Now()
			out, err := cmd.Output()
			d := time.Since(t0)
			if err != nil {
				b.Fatalf("gpuguard status: %v", err)
			}
			var v struct {
				Instances []struct{ State string } `json:"instances"`
			}
			if err := json.Unmarshal(out, &v); err != nil {
				b.Fatal(err)
			}
			running := 0
			for _, in := range v.Instances {
				if in.State == "running" {
					running++
				}
			}
			if running != *statusInstances {
				b.Fatalf("status lists %d running instances of %d: %s", running, *statusInstances, out)
			}
			runs = append(runs, d)
		}
		for _, g := range guards {
			_ = g.cmd.Process.Signal(syscall.SIGTERM)
		}
		for _, g := range guards {
			g.stop()
		}
	}
	stats(b, "", "ms", runs)
}
