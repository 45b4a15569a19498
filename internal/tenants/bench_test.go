package tenants

import (
	"context"
	"fmt"
	"testing"

	"github.com/gpuguard/gpuguard/api"
)

// BenchmarkDecide is one decision of a tenant that ranks first and steps
// itself (Decide, then Confirm), with 0 and with 7 other tenants that
// published their info: the file work a decision costs, without the wait
// for a sample.
func BenchmarkDecide(b *testing.B) {
	for _, others := range []int{0, 7} {
		b.Run(fmt.Sprintf("others-%d", others), func(b *testing.B) {
			dir := b.TempDir()
			c := New(Options{RuntimeDir: dir, Name: "me"})
			defer c.Close()
			for i := range others {
				o := New(Options{RuntimeDir: dir, Name: fmt.Sprintf("o%d", i)})
				defer o.Close()
				if err := o.pub.writeInfo(api.TenantInfo{Priority: 10, Scope: "device", State: api.StateRunning, Levels: 3,
					GPUs: []api.TenantGPU{{UUID: gpuA}}}); err != nil {
					b.Fatal(err)
				}
			}
			self := api.TenantInfo{Priority: 0, Scope: "device", State: api.StateRunning, Levels: 3, GPUs: []api.TenantGPU{{UUID: gpuA}}}
			ctx := context.Background()
			for b.Loop() {
				o := c.Decide(ctx, Proposal{GPU: gpuA, Kind: api.KindDown, Self: self})
				if o.Kind != Step {
					b.Fatalf("%+v", o)
				}
				// Grace 0: the next decision is not held.
				if _, err := c.Confirm(gpuA, o.Claim.Seq, 0); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "us/decision")
			b.ReportMetric(0, "ns/op")
		})
	}
}
