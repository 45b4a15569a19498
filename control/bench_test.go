package control

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// reportMedian adds the median of ds as "median-ns/op": a mean hides the
// tail that a status poller or a subscriber actually sees.
func reportMedian(b *testing.B, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Nanoseconds()), "median-ns/op")
	b.ReportMetric(float64(ds[len(ds)*99/100].Nanoseconds()), "p99-ns/op")
}

// BenchmarkStatusRoundTrip is one status request and reply over the socket
// (target: median <= 1 ms).
func BenchmarkStatusRoundTrip(b *testing.B) {
	s := serve(b, newFakeBackend(), nil)
	ctx := context.Background()
	c, err := Dial(ctx, s.Path())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var ds []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := c.Status(ctx); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(t0))
	}
	reportMedian(b, ds)
}

// BenchmarkPublishToSubscriber is Publish until the subscriber's client has
// the decoded event (target: <= 2 ms).
func BenchmarkPublishToSubscriber(b *testing.B) {
	s := serve(b, newFakeBackend(), nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := Dial(ctx, s.Path())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	events, err := c.Subscribe(ctx)
	if err != nil {
		b.Fatal(err)
	}
	st := api.ProfileState{Level: 1, Profile: "int8", Env: map[string]string{"DTYPE": "int8", "MAX_BATCH": "16"}, Reason: "watermark 0.93 > 0.90"}
	var ds []time.Duration
	for b.Loop() {
		st.Seq++
		t0 := time.Now()
		s.Publish(st)
		if ev := <-events; ev.Seq != st.Seq {
			b.Fatalf("got seq %d, want %d", ev.Seq, st.Seq)
		}
		ds = append(ds, time.Since(t0))
	}
	reportMedian(b, ds)
}
