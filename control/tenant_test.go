package control

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// fakeTenancy is a fakeBackend that also takes part in shared GPUs.
type fakeTenancy struct {
	*fakeBackend
	mu        sync.Mutex
	steps     []api.TenantStep
	decisions []api.TenantDecision
	sleeps    []api.TenantSleep
	readies   int
}

func (f *fakeTenancy) TenantInfo() api.TenantInfo {
	return api.TenantInfo{Name: "demo", Priority: -3, Scope: "device", State: api.StateRunning, Levels: 3,
		Starting: true, LeasesBytes: 42, GraceSeconds: 10, SettleSeconds: 5}
}

func (f *fakeTenancy) TenantStep(_ context.Context, st api.TenantStep) (api.TenantDecision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st.Seq == 99 {
		return api.TenantDecision{}, errors.New("decision 99 of GPU G is 2s old; claims expire after 1s")
	}
	f.steps = append(f.steps, st)
	return api.TenantDecision{GPU: st.GPU, Seq: st.Seq, Kind: st.Kind, To: "demo", At: 77, GraceSeconds: 10}, nil
}

func (f *fakeTenancy) TenantDecision(_ context.Context, d api.TenantDecision) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.decisions = append(f.decisions, d)
	return nil
}

func (f *fakeTenancy) TenantSleep(_ context.Context, ts api.TenantSleep) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ts.For == "busy" {
		return errors.New("not sleeping for busy: a request is in flight or held at its door")
	}
	f.sleeps = append(f.sleeps, ts)
	return nil
}

func (f *fakeTenancy) Ready(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.readies++
	return nil
}

func TestTenantRequests(t *testing.T) {
	b := &fakeTenancy{fakeBackend: newFakeBackend()}
	s := serve(t, b, nil)
	c := dialRaw(t, s.Path())
	for _, tt := range []struct {
		name, line string
		want       map[string]any
	}{
		{"ready", `{"type":"ready","id":1}`, map[string]any{"ok": true, "id": 1.0}},
		{"tenant", `{"type":"tenant"}`, map[string]any{"ok": true, "name": "demo", "priority": -3.0, "scope": "device",
			"state": "running", "levels": 3.0, "gpus": []any{}, "starting": true, "leases_bytes": 42.0, "grace_seconds": 10.0, "settle_seconds": 5.0}},
		{"tenant_step", `{"type":"tenant_step","gpu":"G","seq":4,"kind":"down","by":"llm","at":123,"watermark":0.95,"id":2}`,
			map[string]any{"ok": true, "id": 2.0, "gpu": "G", "seq": 4.0, "kind": "down", "to": "demo", "at": 77.0, "grace_seconds": 10.0}},
		{"tenant_step refused", `{"type":"tenant_step","gpu":"G","seq":99,"kind":"down","by":"llm","at":123}`,
			map[string]any{"ok": false, "error": "decision 99 of GPU G is 2s old; claims expire after 1s"}},
		{"tenant_step without gpu", `{"type":"tenant_step","seq":4,"kind":"down","by":"llm","at":123}`, map[string]any{"ok": false}},
		{"tenant_step with a bad kind", `{"type":"tenant_step","gpu":"G","seq":4,"kind":"sideways","by":"llm","at":123}`, map[string]any{"ok": false}},
		{"tenant_step with a string seq", `{"type":"tenant_step","gpu":"G","seq":"4","kind":"down","by":"llm","at":123}`, map[string]any{"ok": false}},
		{"tenant_decision", `{"type":"tenant_decision","gpu":"G","seq":5,"kind":"critical","to":"batch","at":9,"grace_seconds":3}`, map[string]any{"ok": true}},
		{"tenant_decision without to", `{"type":"tenant_decision","gpu":"G","seq":5,"kind":"down","at":9}`, map[string]any{"ok": false}},
		{"tenant_decision with a negative grace", `{"type":"tenant_decision","gpu":"G","seq":5,"kind":"down","to":"b","at":9,"grace_seconds":-1}`, map[string]any{"ok": false}},
		{"tenant_sleep", `{"type":"tenant_sleep","gpu":"G","for":"chat","priority":2,"at":9,"id":3}`, map[string]any{"ok": true, "id": 3.0}},
		{"tenant_sleep refused", `{"type":"tenant_sleep","gpu":"G","for":"busy","at":9}`,
			map[string]any{"ok": false, "error": "not sleeping for busy: a request is in flight or held at its door"}},
		{"tenant_sleep without for", `{"type":"tenant_sleep","gpu":"G","at":9}`, map[string]any{"ok": false}},
		{"tenant_sleep without at", `{"type":"tenant_sleep","gpu":"G","for":"chat"}`, map[string]any{"ok": false}},
		{"the connection still works", `{"type":"ready"}`, map[string]any{"ok": true}},
	} {
		got := c.roundTrip(tt.line)
		for k, v := range tt.want {
			if gv, ok := got[k]; !ok || fmt.Sprint(gv) != fmt.Sprint(v) {
				t.Errorf("%s: reply[%q] = %#v, want %#v (reply %v)", tt.name, k, gv, v, got)
			}
		}
	}
	if b.readies != 2 {
		t.Errorf("Ready called %d times, want 2", b.readies)
	}
	if len(b.steps) != 1 || b.steps[0] != (api.TenantStep{GPU: "G", Seq: 4, Kind: "down", By: "llm", At: 123, Watermark: 0.95}) {
		t.Errorf("TenantStep got %+v", b.steps)
	}
	if len(b.decisions) != 1 || b.decisions[0] != (api.TenantDecision{GPU: "G", Seq: 5, Kind: "critical", To: "batch", At: 9, GraceSeconds: 3}) {
		t.Errorf("TenantDecision got %+v", b.decisions)
	}
	if len(b.sleeps) != 1 || b.sleeps[0] != (api.TenantSleep{GPU: "G", For: "chat", Priority: 2, At: 9}) {
		t.Errorf("TenantSleep got %+v", b.sleeps)
	}
}

// TestTenantRequestsWithoutTenancy: a backend that takes no part refuses
// them, and keeps the connection.
func TestTenantRequestsWithoutTenancy(t *testing.T) {
	s := serve(t, newFakeBackend(), nil)
	c := dialRaw(t, s.Path())
	for _, line := range []string{`{"type":"ready","id":1}`, `{"type":"tenant"}`} {
		if got := c.roundTrip(line); got["ok"] != false || got["error"] == nil {
			t.Errorf("%s: %v", line, got)
		}
	}
	if got := c.roundTrip(`{"type":"status"}`); got["ok"] != true {
		t.Errorf("status after: %v", got)
	}
}

func TestTenantClient(t *testing.T) {
	b := &fakeTenancy{fakeBackend: newFakeBackend()}
	s := serve(t, b, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := Dial(ctx, s.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	info, err := cl.Tenant(ctx)
	if err != nil || info.Name != "demo" || info.Priority != -3 || !info.Starting || info.LeasesBytes != 42 {
		t.Fatalf("Tenant: %+v %v", info, err)
	}
	d, err := cl.TenantStep(ctx, api.TenantStep{GPU: "G", Seq: 8, Kind: api.KindUp, By: "x", At: 1})
	if err != nil || d.Seq != 8 || d.To != "demo" || d.Kind != api.KindUp {
		t.Fatalf("TenantStep: %+v %v", d, err)
	}
	var re *RemoteError
	if _, err := cl.TenantStep(ctx, api.TenantStep{GPU: "G", Seq: 99, Kind: api.KindDown, By: "x", At: 1}); !errors.As(err, &re) {
		t.Fatalf("refused TenantStep: %v, want a RemoteError", err)
	}
	if err := cl.TenantDecision(ctx, api.TenantDecision{GPU: "G", Seq: 1, Kind: api.KindDown, To: "b", At: 1}); err != nil {
		t.Fatal(err)
	}
	if err := cl.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cl.TenantSleep(ctx, api.TenantSleep{GPU: "G", For: "chat", At: 1}); err != nil {
		t.Fatal(err)
	}
	if err := cl.TenantSleep(ctx, api.TenantSleep{GPU: "G", For: "busy", At: 1}); !errors.As(err, &re) {
		t.Fatalf("a refused sleep: %v, want a RemoteError", err)
	}
}

// TestValidKind: the four decision kinds are valid (tenant_step and
// tenant_decision accept them), nothing else.
func TestValidKind(t *testing.T) {
	for _, kind := range []string{api.KindDown, api.KindPredicted, api.KindCritical, api.KindUp} {
		if !validKind(kind) {
			t.Errorf("%s: not valid", kind)
		}
	}
	if validKind("sideways") || validKind("") {
		t.Error("unknown kinds must not be valid")
	}
}
