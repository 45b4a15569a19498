package deploy

import (
	"encoding/json"
	"maps"
	"os"
	"slices"
	"testing"
)

// seriesExport is what TestExportSeries writes: every series family with
// its labels and the values seen, and which labels take values gpuguard
// does not fix (instance names, GPU indices, profile names).
type seriesExport struct {
	Series     map[string]map[string][]string `json:"series"`
	FreeLabels []string                       `json:"free_labels"`
}

// TestExportSeries hands the series a real registry exposes to the
// Kubernetes validation module (deploy/kubernetes/validate), which checks
// its recording rules, prometheus-adapter rules and HPA against them: with
// GPUGUARD_SERIES_OUT set, it writes them there as JSON. The module runs
// this test rather than keeping a list of its own, so there is one list of
// what gpuguard exports, gathered() here, and a metric added for the alert
// rules is known to the Kubernetes checks at once, with nothing to
// regenerate.
func TestExportSeries(t *testing.T) {
	s := mustSeries(t)
	out := seriesExport{Series: map[string]map[string][]string{}}
	for l, free := range freeLabels {
		if free {
			out.FreeLabels = append(out.FreeLabels, l)
		}
	}
	slices.Sort(out.FreeLabels)
	for name, labels := range s {
		out.Series[name] = map[string][]string{}
		for l, values := range labels {
			out.Series[name][l] = slices.Sorted(maps.Keys(values))
		}
	}
	for _, want := range []string{"gpuguard_watermark_ratio", "gpuguard_profile_level", "gpuguard_restarts_total", "gpuguard_probe_duration_seconds_bucket"} {
		if _, ok := out.Series[want]; !ok {
			t.Errorf("export lacks %s", want)
		}
	}
	if got := out.Series["gpuguard_restarts_total"]["reason"]; !slices.Contains(got, "oom") {
		t.Errorf("gpuguard_restarts_total reasons %v, want oom among them", got)
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if path := os.Getenv("GPUGUARD_SERIES_OUT"); path != "" {
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
