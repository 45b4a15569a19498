package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuguard/gpuguard/api"
)

// taskResults are gpuguard_tasks_total's results, present from the start.
var taskResults = []string{"done", "failed", "dead", "dropped"}

// taskStates are gpuguard_tasks' states.
var taskStates = []string{api.TaskQueued, api.TaskRunning, api.TaskDone, api.TaskDead}

// taskWaitBuckets span a task run at once (100 ms) to one deferred to the
// next night's window (a day).
var taskWaitBuckets = []float64{0.1, 1, 10, 60, 300, 1800, 3600, 4 * 3600, 12 * 3600, 24 * 3600}

// taskMetrics are the deferred-task series: results and waits from the
// journal's events, the queue's size from the store's counts at scrape
// time.
type taskMetrics struct {
	total *prometheus.CounterVec
	wait  prometheus.Histogram
	state *prometheus.Desc
	cl    prometheus.Labels
	// counts is read at scrape time; nil until CountTasks.
	counts atomic.Pointer[func() api.TaskCounts]
}

func newTaskMetrics(cl prometheus.Labels) *taskMetrics {
	t := &taskMetrics{
		cl: cl,
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "tasks_total", ConstLabels: cl,
			Help: "Deferred tasks finished by result (failed: an attempt failed or timed out; dead: after max_attempts; dropped: by an operator).",
		}, []string{"result"}),
		wait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "task_wait_seconds", ConstLabels: cl,
			Help:    "Time from a task's deferral to its delivery.",
			Buckets: taskWaitBuckets,
		}),
		state: prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "tasks"), "Deferred tasks in the queue by state.", []string{"state"}, cl),
	}
	for _, r := range taskResults {
		t.total.WithLabelValues(r)
	}
	return t
}

func (t *taskMetrics) observe(ev api.Event) {
	switch ev.Event {
	case api.EventTask:
		t.wait.Observe(ev.WaitSeconds)
	case api.EventTaskDone:
		t.total.WithLabelValues("done").Inc()
	case api.EventTaskFailed:
		t.total.WithLabelValues("failed").Inc()
	case api.EventTaskDead:
		t.total.WithLabelValues("dead").Inc()
	case api.EventTaskDropped:
		t.total.WithLabelValues("dropped").Inc()
	}
}

// Describe and Collect make taskMetrics one collector.
func (t *taskMetrics) Describe(ch chan<- *prometheus.Desc) {
	t.total.Describe(ch)
	t.wait.Describe(ch)
	ch <- t.state
}

func (t *taskMetrics) Collect(ch chan<- prometheus.Metric) {
	t.total.Collect(ch)
	t.wait.Collect(ch)
	var c api.TaskCounts
	if f := t.counts.Load(); f != nil {
		c = (*f)()
	}
	for i, n := range []int{c.Queued, c.Running, c.Done, c.Dead} {
		ch <- prometheus.MustNewConstMetric(t.state, prometheus.GaugeValue, float64(n), taskStates[i])
	}
}

// CountTasks exposes the deferred-task queue's counts as gpuguard_tasks;
// counts is read at scrape time and must be cheap (a cached copy).
func (m *Metrics) CountTasks(counts func() api.TaskCounts) {
	m.tasks.counts.Store(&counts)
}
