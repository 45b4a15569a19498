package core

import "github.com/gpuguard/gpuguard/policy"

// DeviceRatio is the device-scope watermark: the highest used/limit over
// the watched GPUs.
func DeviceRatio(devs []Device, pol *policy.Policy) float64 {
	var worst float64
	for _, d := range devs {
		if l := pol.Limit(d.Total); l > 0 {
			if r := float64(d.Used) / float64(l); r > worst {
				worst = r
			}
		}
	}
	return worst
}

// ProcessRatio is the process-scope watermark: the child tree's own usage
// against the quota (summed over GPUs), or without a quota the highest
// per-GPU share of the device's total.
func ProcessRatio(r Reading, tree map[int]bool, quota uint64) float64 {
	perDev := map[int]uint64{}
	var sum uint64
	for _, p := range r.Processes {
		if tree[p.PID] {
			perDev[p.Device] += p.Used
			sum += p.Used
		}
	}
	if quota > 0 {
		return float64(sum) / float64(quota)
	}
	var worst float64
	for _, d := range r.Devices {
		if d.Total > 0 {
			if r := float64(perDev[d.Index]) / float64(d.Total); r > worst {
				worst = r
			}
		}
	}
	return worst
}
