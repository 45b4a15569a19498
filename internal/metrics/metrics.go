package metrics

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gpuguard/gpuguard/api"
)

const namespace = "gpuguard"

// Label values that exist from the start, so that rate() and dashboards see
// a 0 rather than no series until the first event.
var (
	stepdownReasons = []string{api.ReasonWatermark, api.ReasonCritical, api.ReasonPredicted, api.ReasonManual, api.ReasonObserve, api.ReasonIdle, api.ReasonRoom}
	stepupReasons   = []string{api.ReasonRecovered, api.ReasonManual, api.ReasonRequest}
	restartReasons  = []string{api.ReasonOOM, api.ReasonCrash, api.ReasonWatermark, api.ReasonGPUFault, api.ReasonReload}
	decisions       = []string{"gpu", "cpu", "defer", "deny"}
	reloadResults   = []string{ReloadOK, ReloadError}
)

// Server action results, gpuguard_actions_total's result label.
const (
	ActionOK     = "ok"
	ActionFailed = "failed"
)

var actionResults = []string{ActionOK, ActionFailed}

// actionBuckets span a refused connection (1ms) to a vLLM sleep that
// drains and offloads its weights (the default action timeout is 60 s).
var actionBuckets = []float64{0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}

// Reload results: the reason of a reload event, and the result label of
// gpuguard_reloads_total.
const (
	ReloadOK    = "ok"
	ReloadError = api.ReasonError
)

// probeBuckets span 10µs (a sim directory read) to 1s (a stuck driver call);
// beyond that the probe timeout and probe_errors_total tell the story.
var probeBuckets = []float64{
	10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6,
	1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1,
}

// Metrics is one instance's registry. It satisfies supervisor.Observer and
// supervisor.ProbeMeter; all methods are safe for concurrent use.
type Metrics struct {
	reg         *prometheus.Registry
	constLabels prometheus.Labels

	stepdowns     *prometheus.CounterVec
	stepups       *prometheus.CounterVec
	oomFallbacks  *prometheus.CounterVec
	restarts      *prometheus.CounterVec
	admissions    *prometheus.CounterVec
	probeErrors   prometheus.Counter
	probeDuration prometheus.Histogram
	yields        prometheus.Counter
	gpuFaults     *prometheus.CounterVec
	reloads       *prometheus.CounterVec
	notifySkipped prometheus.Counter
	tasks         *taskMetrics // tasks.go
	actions       *prometheus.CounterVec
	actionSeconds prometheus.Histogram
	roomSeconds   prometheus.Histogram // room.go

	// metered is set by the first ObserveProbe call. From then on probe
	// errors are counted there (every failed tick) and probe_error events,
	// which the supervisor may collapse per error streak, no longer count:
	// each failure is counted exactly once whichever way it is reported.
	metered atomic.Bool

	// snapshot is the supervisor's status, read at scrape time; serve
	// holds the front door's series once EnableServe has run.
	snapshot func() api.Status
	serve    atomic.Pointer[serveMetrics]
}

// New builds the registry of instance name. snapshot is called at every
// scrape, from the scraping goroutine; it must be cheap and safe to call
// concurrently with the supervisor (a copy of the last snapshot).
func New(name string, snapshot func() api.Status) *Metrics {
	cl := prometheus.Labels{"name": name}
	m := &Metrics{
		reg:         prometheus.NewRegistry(),
		constLabels: cl,
		snapshot:    snapshot,
		stepdowns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "stepdowns_total", ConstLabels: cl,
			Help: "Profile step-downs by reason (observe: what observe mode would have done).",
		}, []string{"reason"}),
		stepups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "stepups_total", ConstLabels: cl,
			Help: "Profile step-ups by reason (recovered: below low for recover_after; manual: gpuguard step; request: a request woke a sleeping instance).",
		}, []string{"reason"}),
		oomFallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "oom_fallback_total", ConstLabels: cl,
			Help: "Restarts after an out-of-memory exit, by profile before and after (equal at the last profile).",
		}, []string{"from", "to"}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "restarts_total", ConstLabels: cl,
			Help: "Child restarts by reason.",
		}, []string{"reason"}),
		admissions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "admission_decisions_total", ConstLabels: cl,
			Help: "Reservation requests by decision.",
		}, []string{"decision"}),
		probeErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "probe_errors_total", ConstLabels: cl,
			Help: "GPU probe ticks that failed.",
		}),
		probeDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "probe_duration_seconds", ConstLabels: cl,
			Help:    "Duration of one GPU probe tick, failed ones included.",
			Buckets: probeBuckets,
		}),
		yields: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "yields_total", ConstLabels: cl,
			Help: "Decisions on a shared GPU where another tenant stepped instead of this instance.",
		}),
		gpuFaults: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "gpu_faults_total", ConstLabels: cl,
			Help: "GPU fault events (Xid) on watched GPUs, by GPU index and Xid.",
		}, []string{"gpu", "xid"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "reloads_total", ConstLabels: cl,
			Help: "Policy reloads by result (error: refused, nothing changed).",
		}, []string{"result"}),
		notifySkipped: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "notify_skipped_total", ConstLabels: cl,
			Help: "Live changes whose notify signal was not sent because the child did not catch it yet (it reads the state file).",
		}),
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "actions_total", ConstLabels: cl,
			Help: "Server actions (a profile's enter and leave calls) by result: ok (a 2xx), failed (non-2xx, timeout, refused).",
		}, []string{"result"}),
		actionSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "action_duration_seconds", ConstLabels: cl,
			Help:    "How long server actions took, failed ones included.",
			Buckets: actionBuckets,
		}),
	}
	for _, r := range actionResults {
		m.actions.WithLabelValues(r)
	}
	m.tasks = newTaskMetrics(cl)
	m.roomSeconds = newRoomSeconds(cl)
	for _, r := range stepdownReasons {
		m.stepdowns.WithLabelValues(r)
	}
	for _, r := range stepupReasons {
		m.stepups.WithLabelValues(r)
	}
	for _, r := range restartReasons {
		m.restarts.WithLabelValues(r)
	}
	for _, d := range decisions {
		m.admissions.WithLabelValues(d)
	}
	for _, r := range reloadResults {
		m.reloads.WithLabelValues(r)
	}
	m.reg.MustRegister(m.stepdowns, m.stepups, m.oomFallbacks, m.restarts, m.admissions,
		m.probeErrors, m.probeDuration, m.yields, m.gpuFaults, m.reloads, m.notifySkipped, m.actions, m.actionSeconds, m.roomSeconds,
		newSnapshotCollector(cl, snapshot), m.tasks)
	// The runtime collectors take no const labels of their own; wrapping
	// the registerer gives their series the instance name too.
	prometheus.WrapRegistererWith(cl, m.reg).MustRegister(
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewGoCollector(),
	)
	return m
}

// Observe derives counters from one supervisor event. Events that no counter
// follows are ignored.
func (m *Metrics) Observe(ev api.Event) {
	m.tasks.observe(ev)
	switch ev.Event {
	case api.EventStepDown:
		m.stepdowns.WithLabelValues(orUnknown(ev.Reason)).Inc()
	case api.EventStepUp:
		m.stepups.WithLabelValues(orUnknown(ev.Reason)).Inc()
	case api.EventObserve:
		m.stepdowns.WithLabelValues(api.ReasonObserve).Inc()
	case api.EventCritical:
		// Above critical at the last profile: nothing lower to step to,
		// but the contract says it is counted, and this is the step that
		// would have happened.
		m.stepdowns.WithLabelValues(api.ReasonCritical).Inc()
	case api.EventRestart:
		m.restarts.WithLabelValues(orUnknown(ev.Reason)).Inc()
		if ev.Reason == api.ReasonOOM {
			to := ev.To
			if to == "" {
				to = ev.Profile
			}
			m.oomFallbacks.WithLabelValues(orUnknown(ev.From), orUnknown(to)).Inc()
		}
	case api.EventAdmission:
		m.admissions.WithLabelValues(orUnknown(ev.Decision)).Inc()
	case api.EventProbeError:
		if !m.metered.Load() {
			m.probeErrors.Inc()
		}
	case api.EventYield:
		m.yields.Inc()
	case api.EventGPUFault:
		gpu := ev.GPU
		if ev.GPUIndex != nil {
			gpu = strconv.Itoa(*ev.GPUIndex)
		}
		m.gpuFaults.WithLabelValues(orUnknown(gpu), strconv.Itoa(ev.Xid)).Inc()
	case api.EventReload:
		result := ev.Reason
		if result == "" {
			result = ReloadOK
		}
		m.reloads.WithLabelValues(result).Inc()
	case api.EventNotifySkipped:
		m.notifySkipped.Inc()
	case api.EventAction:
		m.actions.WithLabelValues(ActionOK).Inc()
		m.actionSeconds.Observe(ev.Seconds)
	case api.EventActionFailed:
		m.actions.WithLabelValues(ActionFailed).Inc()
		m.actionSeconds.Observe(ev.Seconds)
	case api.EventRoom:
		m.roomSeconds.Observe(ev.Seconds)
	}
}

// ObserveProbe records one probe tick.
func (m *Metrics) ObserveProbe(d time.Duration, err error) {
	m.metered.Store(true)
	m.probeDuration.Observe(d.Seconds())
	if err != nil {
		m.probeErrors.Inc()
	}
}

// Handler serves the registry in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		// Scrapes are cheap but not free; a stampede must not pile up
		// snapshot copies.
		MaxRequestsInFlight: 4,
		Timeout:             10 * time.Second,
	})
}

// Gatherer is the registry, for tests and for checking alert rules and
// dashboards against the series that really exist.
func (m *Metrics) Gatherer() prometheus.Gatherer { return m.reg }

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// CountJournalLosses exposes how many journal events were lost (full disk,
// a full queue) as gpuguard_journal_dropped_total: the journal keeps
// gpuguard supervising through a write failure, and this is where the loss
// shows. dropped is read at scrape time.
func (m *Metrics) CountJournalLosses(dropped func() uint64) {
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: namespace, Name: "journal_dropped_total",
		ConstLabels: m.constLabels,
		Help:        "Journal events lost because they could not be written.",
	}, func() float64 { return float64(dropped()) }))
}
