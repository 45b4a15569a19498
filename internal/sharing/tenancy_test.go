package sharing

import (
	"slices"
	"testing"
	"testing/synctest"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/sharing/sharingtest"
)

// TestPublishCopiesOnlyChangedGPUs: the loop publishes after every event;
// the same GPUs again cost no allocation, and a change of them is what the
// leases are then published for.
func TestPublishCopiesOnlyChangedGPUs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPeers(&sharingtest.Coord{})
		leases := func() uint64 { return 0 }
		gpus := func() []string {
			p.tenancy.mu.Lock()
			defer p.tenancy.mu.Unlock()
			return p.tenancy.gpus
		}
		info := api.TenantInfo{Name: "me", GPUs: []api.TenantGPU{{UUID: "GPU-a"}, {}, {UUID: "GPU-b"}}}
		p.Publish(info, leases)
		synctest.Wait() // the first publication of the leases is over
		if got := gpus(); !slices.Equal(got, []string{"GPU-a", "GPU-b"}) {
			t.Fatalf("watched %v", got)
		}
		if n := testing.AllocsPerRun(100, func() { p.Publish(info, leases) }); n != 0 {
			t.Errorf("%v allocations to publish the same GPUs", n)
		}
		for _, tc := range []struct {
			gpus []api.TenantGPU
			want []string
		}{
			{[]api.TenantGPU{{UUID: "GPU-b"}}, []string{"GPU-b"}},
			{[]api.TenantGPU{{UUID: "GPU-b"}, {UUID: "GPU-c"}}, []string{"GPU-b", "GPU-c"}},
			{[]api.TenantGPU{{UUID: "GPU-c"}, {UUID: "GPU-b"}}, []string{"GPU-c", "GPU-b"}},
			{[]api.TenantGPU{{}}, nil},
		} {
			info.GPUs = tc.gpus
			p.Publish(info, leases)
			if got := gpus(); !slices.Equal(got, tc.want) {
				t.Errorf("after %+v: watched %v, want %v", tc.gpus, got, tc.want)
			}
		}
	})
}
