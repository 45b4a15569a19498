package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gpuguard/gpuguard/api"
)

func TestTaskMetrics(t *testing.T) {
	m := New("llama", func() api.Status { return api.Status{Name: "llama"} })
	m.CountTasks(func() api.TaskCounts { return api.TaskCounts{Queued: 3, Running: 1, Done: 7, Dead: 2} })
	for _, ev := range []api.Event{
		{Event: api.EventTask, WaitSeconds: 0.5}, {Event: api.EventTask, WaitSeconds: 120},
		{Event: api.EventTaskDone}, {Event: api.EventTaskFailed}, {Event: api.EventTaskFailed},
		{Event: api.EventTaskDead}, {Event: api.EventTaskDropped},
	} {
		m.Observe(ev)
	}
	want := `
# HELP gpuguard_tasks Deferred tasks in the queue by state.
# TYPE gpuguard_tasks gauge
gpuguard_tasks{name="llama",state="dead"} 2
gpuguard_tasks{name="llama",state="done"} 7
gpuguard_tasks{name="llama",state="queued"} 3
gpuguard_tasks{name="llama",state="running"} 1
# HELP gpuguard_tasks_total Deferred tasks finished by result (failed: an attempt failed or timed out; dead: after max_attempts; dropped: by an operator).
# TYPE gpuguard_tasks_total counter
gpuguard_tasks_total{name="llama",result="dead"} 1
gpuguard_tasks_total{name="llama",result="done"} 1
gpuguard_tasks_total{name="llama",result="dropped"} 1
gpuguard_tasks_total{name="llama",result="failed"} 2
`
	if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(want), "gpuguard_tasks", "gpuguard_tasks_total"); err != nil {
		t.Fatal(err)
	}
	n, err := testutil.GatherAndCount(m.Gatherer(), "gpuguard_task_wait_seconds")
	if err != nil || n != 1 {
		t.Fatalf("wait histogram: %d series, %v", n, err)
	}
	if got := testutil.CollectAndCount(m.tasks.wait); got != 1 {
		t.Fatalf("wait histogram count %d", got)
	}
	mfs, _ := m.Gatherer().Gather()
	for _, mf := range mfs {
		if mf.GetName() == "gpuguard_task_wait_seconds" {
			if c := mf.GetMetric()[0].GetHistogram().GetSampleCount(); c != 2 {
				t.Fatalf("wait histogram has %d samples, want 2", c)
			}
		}
	}
}
