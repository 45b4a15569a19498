package metrics

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/supervisor"
)

func testStatus() api.Status {
	return api.Status{
		Name: "llama", ChildPID: 4242, State: api.StateRunning,
		Profile: "int8", Level: 1, Levels: 3, Watermark: 0.93,
		IntervalSeconds: 0.05, ETASeconds: ptr(12.5),
		GPUs: []api.GPU{
			{Index: 0, UUID: "GPU-aaaa", UsedBytes: 70 << 30, TotalBytes: 80 << 30},
			{Index: 1, UUID: "GPU-bbbb", UsedBytes: 10 << 30, TotalBytes: 80 << 30},
		},
	}
}

func TestExposition(t *testing.T) {
	m := New("llama", testStatus)
	events := []api.Event{
		{Event: api.EventStart, Profile: "fp16"},
		{Event: api.EventStepDown, Reason: api.ReasonWatermark, From: "fp16", To: "int8"},
		{Event: api.EventStepDown, Reason: api.ReasonManual},
		{Event: api.EventObserve, Reason: api.ReasonWatermark},
		{Event: api.EventCritical, Profile: "int4"},
		{Event: api.EventRestart, Reason: api.ReasonOOM, From: "int8", To: "int4", Profile: "int4"},
		{Event: api.EventRestart, Reason: api.ReasonOOM, From: "int4", Profile: "int4"},
		{Event: api.EventRestart, Reason: api.ReasonCrash, Profile: "int4"},
		{Event: api.EventAdmission, Decision: "gpu"},
		{Event: api.EventAdmission, Decision: "defer"},
		{Event: api.EventAdmission, Decision: "defer"},
		{Event: api.EventProbeError},
		{Event: api.EventStepDown, Reason: api.ReasonPredicted},
		{Event: api.EventRestart, Reason: api.ReasonGPUFault},
		{Event: api.EventYield, To: "batch", GPU: "GPU-aaaa"},
		{Event: api.EventYield, To: "batch", GPU: "GPU-aaaa"},
		{Event: api.EventGPUFault, GPU: "GPU-aaaa", GPUIndex: ptr(0), Xid: 79},
		{Event: api.EventGPUFault, GPU: "GPU-bbbb", Xid: 13},
		{Event: api.EventReload, Changed: []string{"watermark.high"}},
		{Event: api.EventReload, Reason: ReloadError},
		{Event: api.EventReload, Reason: ReloadError},
		{Event: api.EventNotifySkipped},
		{Event: "some_future_event"},
	}
	for _, ev := range events {
		m.Observe(ev)
	}
	const want = `
# HELP gpuguard_admission_decisions_total Reservation requests by decision.
# TYPE gpuguard_admission_decisions_total counter
gpuguard_admission_decisions_total{decision="cpu",name="llama"} 0
gpuguard_admission_decisions_total{decision="defer",name="llama"} 2
gpuguard_admission_decisions_total{decision="deny",name="llama"} 0
gpuguard_admission_decisions_total{decision="gpu",name="llama"} 1
# HELP gpuguard_child_up 1 while a child process runs, else 0.
# TYPE gpuguard_child_up gauge
gpuguard_child_up{name="llama"} 1
# HELP gpuguard_gpu_faults_total GPU fault events (Xid) on watched GPUs, by GPU index and Xid.
# TYPE gpuguard_gpu_faults_total counter
gpuguard_gpu_faults_total{gpu="0",name="llama",xid="79"} 1
gpuguard_gpu_faults_total{gpu="GPU-bbbb",name="llama",xid="13"} 1
# HELP gpuguard_gpu_memory_total_bytes GPU memory of a watched GPU.
# TYPE gpuguard_gpu_memory_total_bytes gauge
gpuguard_gpu_memory_total_bytes{gpu="0",name="llama",uuid="GPU-aaaa"} 8.589934592e+10
gpuguard_gpu_memory_total_bytes{gpu="1",name="llama",uuid="GPU-bbbb"} 8.589934592e+10
# HELP gpuguard_gpu_memory_used_bytes GPU memory in use on a watched GPU, all processes.
# TYPE gpuguard_gpu_memory_used_bytes gauge
gpuguard_gpu_memory_used_bytes{gpu="0",name="llama",uuid="GPU-aaaa"} 7.516192768e+10
gpuguard_gpu_memory_used_bytes{gpu="1",name="llama",uuid="GPU-bbbb"} 1.073741824e+10
# HELP gpuguard_notify_skipped_total Live changes whose notify signal was not sent because the child did not catch it yet (it reads the state file).
# TYPE gpuguard_notify_skipped_total counter
gpuguard_notify_skipped_total{name="llama"} 1
# HELP gpuguard_oom_fallback_total Restarts after an out-of-memory exit, by profile before and after (equal at the last profile).
# TYPE gpuguard_oom_fallback_total counter
gpuguard_oom_fallback_total{from="int4",name="llama",to="int4"} 1
gpuguard_oom_fallback_total{from="int8",name="llama",to="int4"} 1
# HELP gpuguard_poll_interval_seconds The current GPU polling period (adaptive polling shortens it while memory rises).
# TYPE gpuguard_poll_interval_seconds gauge
gpuguard_poll_interval_seconds{name="llama"} 0.05
# HELP gpuguard_probe_errors_total GPU probe ticks that failed.
# TYPE gpuguard_probe_errors_total counter
gpuguard_probe_errors_total{name="llama"} 1
# HELP gpuguard_profile_level 0-based index of the current profile (0 = best quality).
# TYPE gpuguard_profile_level gauge
gpuguard_profile_level{name="llama"} 1
# HELP gpuguard_profile_levels Number of profiles in the ladder; profile_level = profile_levels-1 is the last.
# TYPE gpuguard_profile_levels gauge
gpuguard_profile_levels{name="llama"} 3
# HELP gpuguard_restarts_total Child restarts by reason.
# TYPE gpuguard_restarts_total counter
gpuguard_restarts_total{name="llama",reason="crash"} 1
gpuguard_restarts_total{name="llama",reason="gpu_fault"} 1
gpuguard_restarts_total{name="llama",reason="oom"} 2
gpuguard_restarts_total{name="llama",reason="reload"} 0
gpuguard_restarts_total{name="llama",reason="watermark"} 0
# HELP gpuguard_reloads_total Policy reloads by result (error: refused, nothing changed).
# TYPE gpuguard_reloads_total counter
gpuguard_reloads_total{name="llama",result="error"} 2
gpuguard_reloads_total{name="llama",result="ok"} 1
# HELP gpuguard_stepdowns_total Profile step-downs by reason (observe: what observe mode would have done).
# TYPE gpuguard_stepdowns_total counter
gpuguard_stepdowns_total{name="llama",reason="critical"} 1
gpuguard_stepdowns_total{name="llama",reason="idle"} 0
gpuguard_stepdowns_total{name="llama",reason="manual"} 1
gpuguard_stepdowns_total{name="llama",reason="observe"} 1
gpuguard_stepdowns_total{name="llama",reason="predicted"} 1
gpuguard_stepdowns_total{name="llama",reason="room"} 0
gpuguard_stepdowns_total{name="llama",reason="watermark"} 1
# HELP gpuguard_watermark_eta_seconds Projected seconds until the watermark reaches critical at the current trend; absent when not rising.
# TYPE gpuguard_watermark_eta_seconds gauge
gpuguard_watermark_eta_seconds{name="llama"} 12.5
# HELP gpuguard_watermark_ratio Last watermark sample: used/(quota or total), the worst watched GPU (0..1).
# TYPE gpuguard_watermark_ratio gauge
gpuguard_watermark_ratio{name="llama"} 0.93
# HELP gpuguard_yields_total Decisions on a shared GPU where another tenant stepped instead of this instance.
# TYPE gpuguard_yields_total counter
gpuguard_yields_total{name="llama"} 2
`
	names := []string{
		"gpuguard_admission_decisions_total", "gpuguard_child_up",
		"gpuguard_gpu_memory_total_bytes", "gpuguard_gpu_memory_used_bytes",
		"gpuguard_oom_fallback_total", "gpuguard_probe_errors_total",
		"gpuguard_profile_level", "gpuguard_profile_levels", "gpuguard_restarts_total",
		"gpuguard_stepdowns_total", "gpuguard_watermark_ratio",
		"gpuguard_gpu_faults_total", "gpuguard_notify_skipped_total", "gpuguard_poll_interval_seconds",
		"gpuguard_reloads_total", "gpuguard_watermark_eta_seconds", "gpuguard_yields_total",
	}
	if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
}

func TestProbeMeter(t *testing.T) {
	m := New("x", func() api.Status { return api.Status{} })
	m.Observe(api.Event{Event: api.EventProbeError}) // before any ObserveProbe: counted
	m.ObserveProbe(20*time.Microsecond, nil)
	m.ObserveProbe(3*time.Millisecond, errors.New("GPU is lost"))
	m.Observe(api.Event{Event: api.EventProbeError}) // already counted by ObserveProbe
	const want = `
# HELP gpuguard_probe_duration_seconds Duration of one GPU probe tick, failed ones included.
# TYPE gpuguard_probe_duration_seconds histogram
gpuguard_probe_duration_seconds_bucket{name="x",le="1e-05"} 0
gpuguard_probe_duration_seconds_bucket{name="x",le="2.5e-05"} 1
gpuguard_probe_duration_seconds_bucket{name="x",le="5e-05"} 1
gpuguard_probe_duration_seconds_bucket{name="x",le="0.0001"} 1
gpuguard_probe_duration_seconds_bucket{name="x",le="0.00025"} 1
gpuguard_probe_duration_seconds_bucket{name="x",le="0.0005"} 1
gpuguard_probe_duration_seconds_bucket{name="x",le="0.001"} 1
gpuguard_probe_duration_seconds_bucket{name="x",le="0.0025"} 1
gpuguard_probe_duration_seconds_bucket{name="x",le="0.005"} 2
gpuguard_probe_duration_seconds_bucket{name="x",le="0.01"} 2
gpuguard_probe_duration_seconds_bucket{name="x",le="0.025"} 2
gpuguard_probe_duration_seconds_bucket{name="x",le="0.05"} 2
gpuguard_probe_duration_seconds_bucket{name="x",le="0.1"} 2
gpuguard_probe_duration_seconds_bucket{name="x",le="0.25"} 2
gpuguard_probe_duration_seconds_bucket{name="x",le="0.5"} 2
gpuguard_probe_duration_seconds_bucket{name="x",le="1"} 2
gpuguard_probe_duration_seconds_bucket{name="x",le="+Inf"} 2
gpuguard_probe_duration_seconds_sum{name="x"} 0.00302
gpuguard_probe_duration_seconds_count{name="x"} 2
# HELP gpuguard_probe_errors_total GPU probe ticks that failed.
# TYPE gpuguard_probe_errors_total counter
gpuguard_probe_errors_total{name="x"} 2
# HELP gpuguard_child_up 1 while a child process runs, else 0.
# TYPE gpuguard_child_up gauge
gpuguard_child_up{name="x"} 0
`
	if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(want),
		"gpuguard_probe_duration_seconds", "gpuguard_probe_errors_total", "gpuguard_child_up"); err != nil {
		t.Fatal(err)
	}
}

// TestEverySeriesNamed checks the contract's "every series carries name",
// the runtime collectors included.
func TestEverySeriesNamed(t *testing.T) {
	m := New("llama", testStatus)
	m.Observe(api.Event{Event: api.EventRestart, Reason: api.ReasonOOM, From: "a", To: "b"})
	mfs, err := m.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sawGo, sawProcess bool
	for _, mf := range mfs {
		sawGo = sawGo || strings.HasPrefix(mf.GetName(), "go_")
		sawProcess = sawProcess || strings.HasPrefix(mf.GetName(), "process_")
		for _, mt := range mf.GetMetric() {
			named := false
			for _, lp := range mt.GetLabel() {
				named = named || (lp.GetName() == "name" && lp.GetValue() == "llama")
			}
			if !named {
				t.Errorf("%s %v lacks name=\"llama\"", mf.GetName(), mt.GetLabel())
			}
		}
	}
	if !sawGo || !sawProcess {
		t.Errorf("go_* collected: %v, process_* collected: %v; want both", sawGo, sawProcess)
	}
}

func TestLint(t *testing.T) {
	m := New("llama", testStatus)
	m.ObserveProbe(time.Millisecond, nil)
	m.Observe(api.Event{Event: api.EventRestart, Reason: api.ReasonOOM, From: "a", To: "b"})
	problems, err := testutil.GatherAndLint(m.Gatherer())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

func TestTwoInstancesDoNotCollide(t *testing.T) {
	a, b := New("a", testStatus), New("b", testStatus)
	a.Observe(api.Event{Event: api.EventStepDown, Reason: api.ReasonWatermark})
	if got := testutil.ToFloat64(b.stepdowns.WithLabelValues(api.ReasonWatermark)); got != 0 {
		t.Fatalf("b counted a's step-down: %v", got)
	}
}

var (
	_ supervisor.Observer   = (*Metrics)(nil)
	_ supervisor.ProbeMeter = (*Metrics)(nil)
)

func TestJournalLosses(t *testing.T) {
	m := New("llama", func() api.Status { return api.Status{} })
	var lost uint64 = 3
	m.CountJournalLosses(func() uint64 { return lost })
	want := `
# HELP gpuguard_journal_dropped_total Journal events lost because they could not be written.
# TYPE gpuguard_journal_dropped_total counter
gpuguard_journal_dropped_total{name="llama"} 3
`
	if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(want), "gpuguard_journal_dropped_total"); err != nil {
		t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }

// TestETAAbsentWhenNotRising: with no projection the ETA gauge is not
// exposed at all, so `gpuguard_watermark_eta_seconds < 60` alerts only on
// a real trend.
func TestETAAbsentWhenNotRising(t *testing.T) {
	m := New("x", func() api.Status { return api.Status{IntervalSeconds: 1} })
	n, err := testutil.GatherAndCount(m.Gatherer(), "gpuguard_watermark_eta_seconds")
	if err != nil || n != 0 {
		t.Fatalf("eta series: %d (%v), want none", n, err)
	}
}
