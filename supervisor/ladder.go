package supervisor

import (
	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/policy"
)

// limit is what a device's usage is measured against: the quota when one
// is set (capping the device's total), else the total.
func limit(d gpu.Device, quota uint64) uint64 {
	if quota > 0 && (d.Total == 0 || quota < d.Total) {
		return quota
	}
	return d.Total
}

// fits reports whether a profile needing needs bytes fits: on every watched
// GPU, used + needs <= limit x high. A profile without an estimate fits.
func fits(needs uint64, devs []gpu.Device, quota uint64, high float64) bool {
	if needs == 0 {
		return true
	}
	for _, d := range devs {
		if float64(d.Used)+float64(needs) > float64(limit(d, quota))*high {
			return false
		}
	}
	return true
}

// pickProfile returns the best profile at or below level from that fits,
// and false when none does.
func pickProfile(profiles []policy.Profile, from int, devs []gpu.Device, quota uint64, high float64) (int, bool) {
	for i := from; i < len(profiles); i++ {
		if fits(profiles[i].Needs, devs, quota, high) {
			return i, true
		}
	}
	return 0, false
}

// deviceRatio is the device-scope watermark: the highest used/limit over
// the watched GPUs.
func deviceRatio(devs []gpu.Device, quota uint64) float64 {
	var worst float64
	for _, d := range devs {
		if l := limit(d, quota); l > 0 {
			if r := float64(d.Used) / float64(l); r > worst {
				worst = r
			}
		}
	}
	return worst
}

// processRatio is the process-scope watermark: the child tree's own usage
// against the quota (summed over GPUs), or without a quota the highest
// per-GPU share of the device's total.
func processRatio(s gpu.Sample, tree map[int]bool, quota uint64) float64 {
	perDev := map[int]uint64{}
	var sum uint64
	for _, p := range s.Processes {
		if tree[p.PID] {
			perDev[p.Device] += p.Used
			sum += p.Used
		}
	}
	if quota > 0 {
		return float64(sum) / float64(quota)
	}
	var worst float64
	for _, d := range s.Devices {
		if d.Total > 0 {
			if r := float64(perDev[d.Index]) / float64(d.Total); r > worst {
				worst = r
			}
		}
	}
	return worst
}

// anyAlive reports whether any of pids still holds GPU memory in s.
func anyAlive(s gpu.Sample, pids map[int]bool) bool {
	for _, p := range s.Processes {
		if pids[p.PID] {
			return true
		}
	}
	return false
}
