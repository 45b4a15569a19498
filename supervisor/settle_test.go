package supervisor

import (
	"testing"
	"time"
)

func TestSettleTracker(t *testing.T) {
	const mib = 1 << 20
	const total = 16 * gib // 1% is 164 MiB: above the 64 MiB floor
	type reading struct {
		at   time.Duration
		used uint64
		want bool
	}
	for _, tc := range []struct {
		name     string
		baseline uint64
		total    uint64
		readings []reading
	}{
		{"flat from the launch", 0, total, []reading{{time.Second, 0, false}, {5 * time.Second, 0, true}}},
		{"growth restarts the wait", 0, total, []reading{
			{time.Second, 4 * gib, false}, {3 * time.Second, 8 * gib, false}, {7 * time.Second, 8 * gib, false}, {8 * time.Second, 8 * gib, true}}},
		{"wobble within 1% is flat", 0, total, []reading{
			{time.Second, 4 * gib, false}, {2 * time.Second, 4*gib + 100*mib, false}, {6 * time.Second, 4*gib + 150*mib, true}}},
		{"creeping growth counts once it passes the tolerance", 0, total, []reading{
			{time.Second, 4 * gib, false}, {2 * time.Second, 4*gib + 100*mib, false}, {4 * time.Second, 4*gib + 200*mib, false},
			{8 * time.Second, 4*gib + 200*mib, false}, {9 * time.Second, 4*gib + 200*mib, true}}},
		{"on a small GPU the 64 MiB floor applies", 0, 2 * gib, []reading{
			{time.Second, 60 * mib, false}, {5 * time.Second, 60 * mib, true}}},
		{"shrinking is not growth", 0, total, []reading{
			{time.Second, 4 * gib, false}, {3 * time.Second, 2 * gib, false}, {6 * time.Second, 2 * gib, true}}},
		{"device usage: the other tenants' memory is the baseline", 10 * gib, total, []reading{
			{time.Second, 10 * gib, false}, {5 * time.Second, 10 * gib, true}}},
		{"device usage: growth above it counts", 10 * gib, total, []reading{
			{time.Second, 11 * gib, false}, {5 * time.Second, 11 * gib, false}, {6 * time.Second, 11 * gib, true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			launch := time.Unix(1000, 0)
			s := newSettleTracker(launch, 5*time.Second, tc.baseline)
			for i, r := range tc.readings {
				if got := s.observe(launch.Add(r.at), r.used, tc.total); got != r.want {
					t.Fatalf("reading %d (%v, %d MiB): settled %v, want %v", i, r.at, r.used/mib, got, r.want)
				}
			}
		})
	}
}
