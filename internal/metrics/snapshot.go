package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuguard/gpuguard/api"
)

// snapshotCollector turns the supervisor's snapshot into gauges at scrape
// time. It keeps no state, so a GPU that disappears from the snapshot also
// disappears from the exposition.
type snapshotCollector struct {
	snapshot func() api.Status

	used, total, watermark, level, levels, childUp, interval, eta *prometheus.Desc
}

func newSnapshotCollector(cl prometheus.Labels, snapshot func() api.Status) *snapshotCollector {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(namespace, "", name), help, labels, cl)
	}
	return &snapshotCollector{
		snapshot:  snapshot,
		used:      desc("gpu_memory_used_bytes", "GPU memory in use on a watched GPU, all processes.", "gpu", "uuid"),
		total:     desc("gpu_memory_total_bytes", "GPU memory of a watched GPU.", "gpu", "uuid"),
		watermark: desc("watermark_ratio", "Last watermark sample: used/(quota or total), the worst watched GPU (0..1)."),
		level:     desc("profile_level", "0-based index of the current profile (0 = best quality)."),
		levels:    desc("profile_levels", "Number of profiles in the ladder; profile_level = profile_levels-1 is the last."),
		childUp:   desc("child_up", "1 while a child process runs, else 0."),
		interval:  desc("poll_interval_seconds", "The current GPU polling period (adaptive polling shortens it while memory rises)."),
		eta:       desc("watermark_eta_seconds", "Projected seconds until the watermark reaches critical at the current trend; absent when not rising."),
	}
}

func (c *snapshotCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.used, c.total, c.watermark, c.level, c.levels, c.childUp, c.interval, c.eta} {
		ch <- d
	}
}

func (c *snapshotCollector) Collect(ch chan<- prometheus.Metric) {
	if c.snapshot == nil {
		return
	}
	st := c.snapshot()
	for _, g := range st.GPUs {
		idx := strconv.Itoa(g.Index)
		ch <- prometheus.MustNewConstMetric(c.used, prometheus.GaugeValue, float64(g.UsedBytes), idx, g.UUID)
		ch <- prometheus.MustNewConstMetric(c.total, prometheus.GaugeValue, float64(g.TotalBytes), idx, g.UUID)
	}
	up := 0.0
	if st.ChildPID > 0 {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(c.watermark, prometheus.GaugeValue, st.Watermark)
	ch <- prometheus.MustNewConstMetric(c.level, prometheus.GaugeValue, float64(st.Level))
	ch <- prometheus.MustNewConstMetric(c.levels, prometheus.GaugeValue, float64(st.Levels))
	ch <- prometheus.MustNewConstMetric(c.childUp, prometheus.GaugeValue, up)
	ch <- prometheus.MustNewConstMetric(c.interval, prometheus.GaugeValue, st.IntervalSeconds)
	if st.ETASeconds != nil {
		ch <- prometheus.MustNewConstMetric(c.eta, prometheus.GaugeValue, *st.ETASeconds)
	}
}
