package door

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gpuguard/gpuguard/api"
)

// TestListings: /v1/models and /api/tags list every name, sorted, in each
// API's shape; /v1/models/NAME one; /api/ps the ready ones; /api/version
// gpuguard's version; /gpuguard/v1/models each name's status objects,
// with no child output, ticket or request in them.
func TestListings(t *testing.T) {
	llm, emb := newFakeInstance(t, "llm", nil), newFakeInstance(t, "embed", nil)
	fl := llm.found(api.StateRunning, true, "qwen2.5-7b-instruct", "qwen")
	fl.Status.LastEvent = &api.Event{Time: time.Unix(1e9, 0).UTC(), Event: api.EventRestart, Profile: "fp16", Level: 0, Reason: "crash",
		Stderr: []string{"secret prompt"}, Detail: "child output", Ticket: "t-123", Path: "/sleep"}
	tb := Build(nil, []Found{fl, emb.found(api.StateAsleep, false)})
	url, _ := testDoor(t, tb, 1<<20)

	get := func(path string, v any) {
		t.Helper()
		resp, body := do(t, "GET", url+path, "")
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
		}
		if h, ok := instanceHeader(resp); !ok || h != "" {
			t.Errorf("%s: %s %q present %v, want present and empty", path, HeaderInstance, h, ok)
		}
		if err := json.Unmarshal([]byte(body), v); err != nil {
			t.Fatalf("%s: %s: %v", path, body, err)
		}
	}

	var models openAIList
	get("/v1/models", &models)
	var ids []string
	for _, m := range models.Data {
		ids = append(ids, m.ID)
		if m.Object != "model" || m.OwnedBy != "gpuguard" || m.Created == 0 {
			t.Errorf("entry %+v", m)
		}
	}
	if models.Object != "list" || strings.Join(ids, ",") != "embed,qwen,qwen2.5-7b-instruct" {
		t.Errorf("/v1/models: %+v", models)
	}
	if g := models.Data[0].GPUGuard; g.Instance != "embed" || g.State != api.StateAsleep || g.Profile != "fp16" {
		t.Errorf("embed's gpuguard %+v", g)
	}
	var one openAIModel
	get("/v1/models/qwen", &one)
	if one.ID != "qwen" || one.GPUGuard.Instance != "llm" || one.GPUGuard.State != "ready" {
		t.Errorf("/v1/models/qwen: %+v", one)
	}

	var tags, ps ollamaList
	get("/api/tags", &tags)
	get("/api/ps", &ps)
	names := func(l ollamaList) string {
		var out []string
		for _, m := range l.Models {
			if m.Name != m.Model {
				t.Errorf("name %q model %q", m.Name, m.Model)
			}
			out = append(out, m.Name)
		}
		return strings.Join(out, ",")
	}
	if got := names(tags); got != "embed,qwen,qwen2.5-7b-instruct" {
		t.Errorf("/api/tags: %s", got)
	}
	if got := names(ps); got != "qwen,qwen2.5-7b-instruct" {
		t.Errorf("/api/ps: %s, want the awake and ready ones", got)
	}

	var v map[string]string
	get("/api/version", &v)
	if v["version"] != "1.2.3" {
		t.Errorf("/api/version: %v", v)
	}

	_, raw := do(t, "GET", url+"/gpuguard/v1/models", "")
	var door doorList
	get("/gpuguard/v1/models", &door)
	if len(door.Models) != 3 || door.Models[1].Name != "qwen" || len(door.Models[1].Instances) != 1 || door.Models[1].Instances[0].Name != "llm" {
		t.Fatalf("/gpuguard/v1/models: %s", raw)
	}
	ev := door.Models[1].Instances[0].LastEvent
	if ev == nil || ev.Event != api.EventRestart || ev.Reason != "crash" || ev.Profile != "fp16" || !ev.Time.Equal(time.Unix(1e9, 0)) {
		t.Errorf("last_event %+v", ev)
	}
	for _, secret := range []string{"secret prompt", "child output", "t-123", "/sleep"} {
		if strings.Contains(raw, secret) {
			t.Errorf("/gpuguard/v1/models shows %q: %s", secret, raw)
		}
	}
	if tb.Pick("qwen").Status.LastEvent.Ticket != "t-123" {
		t.Error("redaction changed the table's own status")
	}
}

// TestListingsEmpty: with no instance the lists are empty, not null.
func TestListingsEmpty(t *testing.T) {
	url, _ := testDoor(t, Build(nil, nil), 1<<20)
	for path, want := range map[string]string{
		"/v1/models": `{"object":"list","data":[]}`, "/api/tags": `{"models":[]}`, "/api/ps": `{"models":[]}`, "/gpuguard/v1/models": `{"models":[]}`,
	} {
		if resp, body := do(t, "GET", url+path, ""); resp.StatusCode != 200 || strings.TrimSpace(body) != want {
			t.Errorf("%s: %d %s, want %s", path, resp.StatusCode, body, want)
		}
	}
	if resp, body := do(t, "HEAD", url+"/v1/models", ""); resp.StatusCode != 200 || body != "" {
		t.Errorf("HEAD /v1/models: %d %q", resp.StatusCode, body)
	}
}

// TestMetricsBounded: a declared name is its own label (aliases too),
// anything else "unknown": 50 random models add no series.
func TestMetricsBounded(t *testing.T) {
	llm := newFakeInstance(t, "llm", nil)
	tb := Build(nil, []Found{llm.found(api.StateRunning, true, "qwen2.5", "qwen")})
	url, m := testDoor(t, tb, 1<<20)
	do(t, "POST", url+"/v1/completions", `{"model":"qwen"}`)
	do(t, "POST", url+"/v1/completions", `{"model":"qwen2.5"}`)
	do(t, "GET", url+"/v1/models", "")
	before := testutil.CollectAndCount(m.requests) + testutil.CollectAndCount(m.duration)
	for range 50 {
		do(t, "POST", url+"/v1/chat/completions", fmt.Sprintf(`{"model":"m-%d"}`, rand.Int64()))
	}
	if after := testutil.CollectAndCount(m.requests) + testutil.CollectAndCount(m.duration); after != before+1 {
		t.Errorf("%d series before 50 unknown models, %d after: want one more (unknown, 404)", before, after)
	}
	for labels, want := range map[[2]string]float64{{"qwen", "200"}: 1, {"qwen2.5", "200"}: 1, {"unknown", "404"}: 50, {"unknown", "200"}: 1} {
		if got := testutil.ToFloat64(m.requests.WithLabelValues(labels[0], labels[1])); got != want {
			t.Errorf("requests %v = %v, want %v", labels, got, want)
		}
	}
	want := "# HELP gpuguard_door_instances Instances with a front door that gpuguard door routes to now.\n" +
		"# TYPE gpuguard_door_instances gauge\ngpuguard_door_instances 1\n"
	if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(want), "gpuguard_door_instances"); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.CollectAndLint(m.requests, "gpuguard_door_requests_total"); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}
