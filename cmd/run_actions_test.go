package cmd

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/supervisor"
)

// TestActionCallerAcceptAndUntil: the supervisor's call reaches the HTTP
// caller whole: an accepted 400 succeeds, and the until is polled until
// met, or fails the call.
func TestActionCallerAcceptAndUntil(t *testing.T) {
	var polls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/models/load":
			http.Error(w, `{"error":{"message":"model is already running"}}`, http.StatusBadRequest)
		case "/props":
			if polls.Add(1) < 3 {
				http.Error(w, "loading", http.StatusServiceUnavailable)
				return
			}
			w.Write([]byte(`{"model":"tiny"}`))
		}
	}))
	defer srv.Close()
	c := newActionCaller()
	call := supervisor.ActionCall{Method: "POST", URL: srv.URL + "/models/load", Timeout: time.Minute, Accept: []int{400},
		UntilURL: srv.URL + "/props?model=tiny", UntilStatus: []int{200}, UntilTimeout: time.Minute}
	if res := c.Call(context.Background(), call); res.Err != nil || res.Status != 400 || polls.Load() != 3 {
		t.Fatalf("result %+v after %d polls, want the accepted 400 after 3", res, polls.Load())
	}
	call.UntilStatus, call.UntilTimeout = []int{404}, 300*time.Millisecond
	if res := c.Call(context.Background(), call); res.Err == nil {
		t.Errorf("result %+v, want the until's failure", res)
	}
	call.Accept = nil
	if res := c.Call(context.Background(), call); res.Err == nil || res.Status != 400 {
		t.Errorf("result %+v, want the 400 a failure without accept", res)
	}
}
