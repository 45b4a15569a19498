package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

type ruleFile struct {
	Groups []struct {
		Name     string `yaml:"name"`
		Interval string `yaml:"interval"` // the group's evaluation interval, if not the global one
		Rules    []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// readRules decodes prometheus/alerts.yml, failing on unknown keys.
func readRules(t *testing.T) ruleFile {
	t.Helper()
	b, err := os.ReadFile("prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&rf); err != nil {
		t.Fatal(err)
	}
	return rf
}

func mustSeries(t *testing.T) series {
	t.Helper()
	s, err := gathered()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestAlertRules(t *testing.T) {
	s := mustSeries(t)
	rf := readRules(t)
	seen := map[string]bool{}
	n := 0
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			n++
			if r.Alert == "" || seen[r.Alert] {
				t.Errorf("rule %d: missing or duplicate alert name %q", n, r.Alert)
			}
			seen[r.Alert] = true
			if r.For != "" {
				if _, err := time.ParseDuration(r.For); err != nil {
					t.Errorf("%s: for: %v", r.Alert, err)
				}
			}
			if sev := r.Labels["severity"]; sev != "critical" && sev != "warning" && sev != "info" {
				t.Errorf("%s: severity %q", r.Alert, sev)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: needs a summary and a description", r.Alert)
			}
			for _, err := range s.checkExpr(r.Expr) {
				t.Errorf("%s: %v", r.Alert, err)
			}
		}
	}
	// The issue asks for these situations to alert.
	for _, want := range []string{"GPUGuardFallbackRateHigh", "GPUGuardCrashLoop", "GPUGuardChildDown",
		"GPUGuardProbeErrors", "GPUGuardStuckAtLastProfile", "GPUGuardOOMFallback"} {
		if !seen[want] {
			t.Errorf("no alert %s", want)
		}
	}
}

// TestPromtool runs Prometheus's own parser where promtool is installed: on
// the alert rules, their unit tests in prometheus/alerts_test.yml, the
// example prometheus.yml, and the dashboard's queries (as recording rules,
// Grafana variables filled in).
func TestPromtool(t *testing.T) {
	pt, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed")
	}
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, expr := range dashboardExprs(t) {
		expr = strings.NewReplacer("$__rate_interval", "5m", "$name", ".*").Replace(expr)
		q, _ := json.Marshal(expr) // a JSON string is a YAML string
		fmt.Fprintf(&rules, "      - record: dashboard_query_%d\n        expr: %s\n", i, q)
	}
	dashRules := filepath.Join(t.TempDir(), "dashboard.yml")
	if err := os.WriteFile(dashRules, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"check", "rules", "prometheus/alerts.yml"},
		{"check", "config", "prometheus/prometheus.yml"},
		{"test", "rules", "prometheus/alerts_test.yml"},
		{"check", "rules", dashRules},
	} {
		if out, err := exec.Command(pt, args...).CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// dashboard is the part of grafana/gpuguard.json the tests look at.
type dashboard struct {
	UID    string `json:"uid"`
	Title  string `json:"title"`
	Panels []struct {
		ID         int    `json:"id"`
		Title      string `json:"title"`
		Datasource struct {
			UID string `json:"uid"`
		} `json:"datasource"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile("grafana/gpuguard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash dashboard
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	return dash
}

func dashboardExprs(t *testing.T) []string {
	var exprs []string
	for _, p := range readDashboard(t).Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	return exprs
}

func TestGrafanaDashboard(t *testing.T) {
	s := mustSeries(t)
	dash := readDashboard(t)
	if dash.UID == "" || dash.Title == "" || len(dash.Panels) == 0 {
		t.Fatalf("dashboard needs a uid, a title and panels")
	}
	ids := map[int]bool{}
	exprs := 0
	for _, p := range dash.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d repeats", p.ID)
		}
		ids[p.ID] = true
		if p.Datasource.UID != "${datasource}" {
			t.Errorf("%s: datasource %q, want the ${datasource} variable", p.Title, p.Datasource.UID)
		}
		if len(p.Targets) == 0 {
			t.Errorf("%s: no queries", p.Title)
		}
		for _, tg := range p.Targets {
			exprs++
			if !strings.Contains(tg.Expr, `name=~"$name"`) {
				t.Errorf("%s: %q ignores the instance selector", p.Title, tg.Expr)
			}
			for _, err := range s.checkExpr(tg.Expr) {
				t.Errorf("%s: %v", p.Title, err)
			}
		}
	}
	vars := map[string]bool{}
	for _, v := range dash.Templating.List {
		vars[v.Name] = true
	}
	if !vars["datasource"] || !vars["name"] {
		t.Errorf("dashboard variables %v, want datasource and name", vars)
	}
	t.Logf("%d panels, %d queries checked", len(dash.Panels), exprs)
}

// TestCheckerCatchesMistakes keeps the checker honest: each of these must
// be rejected.
func TestCheckerCatchesMistakes(t *testing.T) {
	s := mustSeries(t)
	for _, bad := range []string{
		`gpuguard_restart_total`,                                  // misspelt metric
		`gpuguard_restarts_total{reason="oom_kill"}`,              // no such value
		`gpuguard_restarts_total{reson="oom"}`,                    // no such label
		`gpuguard_restarts_total{reason=~"crash|segv"}`,           // one alternative wrong
		`sum by (nmae) (gpuguard_child_up)`,                       // grouping typo
		`rate(gpuguard_probe_errors_total[5q])`,                   // bad range
		`sum(rate(gpuguard_probe_errors_total[5m])`,               // unbalanced
		`gpuguard_child_up{name="x}`,                              // unclosed string
		`gpuguard_child_up_bucket`,                                // gauges have no buckets
		`histogram_quantile(0.9, gpuguard_probe_duration_bucket)`, // wrong histogram name
	} {
		if errs := s.checkExpr(bad); len(errs) == 0 {
			t.Errorf("%q passed the check", bad)
		}
	}
	for _, good := range []string{
		`gpuguard_probe_duration_seconds_bucket`,
		`sum by (le, name) (rate(gpuguard_probe_duration_seconds_bucket{name=~"$name"}[$__rate_interval]))`,
		`gpuguard_oom_fallback_total{from="anything",to!="x"}`,
		`avg_over_time((gpuguard_profile_level > bool 0)[6h:1m])`,
	} {
		if errs := s.checkExpr(good); len(errs) > 0 {
			t.Errorf("%q: %v", good, errs)
		}
	}
}
