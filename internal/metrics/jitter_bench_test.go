package metrics

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// BenchmarkTickJitter answers the question: does being scraped make
// the supervisor's 200ms poll loop late? It runs b.N ticks of a loop shaped
// like the supervisor's (tick, build a snapshot, publish it) twice, first
// alone and then with a scraper at 10 scrapes/s over real HTTP, and reports
// how late each tick was against its schedule. Each tick is 200ms, so pick
// the count: go test ./metrics -run '^$' -bench TickJitter -benchtime 50x
func BenchmarkTickJitter(b *testing.B) {
	const interval = 200 * time.Millisecond
	var cur atomic.Pointer[api.Status]
	cur.Store(&api.Status{})
	m := New("bench", func() api.Status { return *cur.Load() })
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()

	idle := tickLateness(b.N, interval, &cur)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { scrape(b, srv.URL, 100*time.Millisecond, stop) })
	scraped := tickLateness(b.N, interval, &cur)
	close(stop)
	wg.Wait()

	for _, r := range []struct {
		mode string
		late []time.Duration
	}{{"idle", idle}, {"scraped", scraped}} {
		p50, p99, maxv := percentiles(r.late)
		b.ReportMetric(float64(p50.Microseconds()), r.mode+"-p50-µs")
		b.ReportMetric(float64(p99.Microseconds()), r.mode+"-p99-µs")
		b.ReportMetric(float64(maxv.Microseconds()), r.mode+"-max-µs")
	}
	b.ReportMetric(0, "ns/op") // wall time per op is just the interval
}

// tickLateness runs n ticks and returns how late each one was observed
// against start + k*interval.
func tickLateness(n int, interval time.Duration, cur *atomic.Pointer[api.Status]) []time.Duration {
	t := time.NewTicker(interval)
	defer t.Stop()
	start := time.Now()
	late := make([]time.Duration, 0, n)
	for k := 1; k <= n; k++ {
		<-t.C
		late = append(late, time.Since(start.Add(time.Duration(k)*interval)))
		// The supervisor's work per tick: a fresh snapshot with GPU data.
		st := &api.Status{Name: "bench", ChildPID: 1, Level: k % 3, Levels: 3, Watermark: float64(k%100) / 100,
			GPUs: make([]api.GPU, 8)}
		for i := range st.GPUs {
			st.GPUs[i] = api.GPU{Index: i, UUID: "GPU-bench", UsedBytes: uint64(k) << 20, TotalBytes: 80 << 30}
		}
		cur.Store(st)
	}
	return late
}

func scrape(b *testing.B, url string, every time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		resp, err := http.Get(url)
		if err != nil {
			b.Error(err)
			return
		}
		resp.Body.Close()
	}
}

func percentiles(d []time.Duration) (p50, p99, maxv time.Duration) {
	if len(d) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	at := func(q float64) time.Duration { return s[int(q*float64(len(s)-1))] }
	return at(0.50), at(0.99), s[len(s)-1]
}
