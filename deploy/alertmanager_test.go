package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

const (
	amConfigFile   = "alertmanager/alertmanager.yml"
	promConfigFile = "prometheus/prometheus.yml"
	// The design note wants an OOM fallback on call within 5 minutes.
	deliveryBudget = 5 * time.Minute
	oomAlert       = "GPUGuardOOMFallback"
	oncall         = "oncall"
)

// amRoute is the part of an Alertmanager route the delivery bound needs.
type amRoute struct {
	Receiver      string    `yaml:"receiver"`
	Matchers      []string  `yaml:"matchers"`
	Match         any       `yaml:"match"`    // deprecated forms: refused, not
	MatchRE       any       `yaml:"match_re"` // silently ignored
	Continue      bool      `yaml:"continue"`
	GroupWait     string    `yaml:"group_wait"`
	GroupInterval string    `yaml:"group_interval"`
	Routes        []amRoute `yaml:"routes"`
}

// promConfig is the part of prometheus.yml the delivery bound needs.
type promConfig struct {
	Global struct {
		ScrapeInterval     string `yaml:"scrape_interval"`
		EvaluationInterval string `yaml:"evaluation_interval"`
	} `yaml:"global"`
	ScrapeConfigs []scrapeConfig `yaml:"scrape_configs"`
}

type scrapeConfig struct {
	JobName        string `yaml:"job_name"`
	ScrapeInterval string `yaml:"scrape_interval"`
}

// routeHit is a route an alert ends in, with the timings it inherited.
type routeHit struct {
	receiver                 string
	groupWait, groupInterval time.Duration
}

var matcherRE = regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*(?:"(.*)"|(\S*))\s*$`)

// matches reports whether labels satisfy one matcher such as
// severity="critical" or alertname=~"GPUGuard.+" (regexps are anchored, as
// in Alertmanager).
func matches(m string, labels map[string]string) (bool, error) {
	g := matcherRE.FindStringSubmatch(m)
	if g == nil {
		return false, fmt.Errorf("matcher %q: not label=value, !=, =~ or !~", m)
	}
	name, op, val := g[1], g[2], g[3]+g[4]
	got := labels[name]
	switch op {
	case "=":
		return got == val, nil
	case "!=":
		return got != val, nil
	}
	re, err := regexp.Compile("^(?:" + val + ")$")
	if err != nil {
		return false, fmt.Errorf("matcher %q: %w", m, err)
	}
	return re.MatchString(got) == (op == "=~"), nil
}

func duration(s string, inherited time.Duration) (time.Duration, error) {
	if s == "" {
		return inherited, nil
	}
	d, err := model.ParseDuration(s)
	return time.Duration(d), err
}

// route follows Alertmanager's routing: a node whose matchers all match
// hands the alert to its first matching child (and on past children with
// continue: true); if none matches, the node itself takes it. Receivers and
// timings are inherited from the parent.
func route(r amRoute, parent routeHit, labels map[string]string) ([]routeHit, bool, error) {
	if r.Match != nil || r.MatchRE != nil {
		return nil, false, fmt.Errorf("route to %q uses match/match_re: use matchers", r.Receiver)
	}
	for _, m := range r.Matchers {
		ok, err := matches(m, labels)
		if err != nil || !ok {
			return nil, false, err
		}
	}
	here := parent
	if r.Receiver != "" {
		here.receiver = r.Receiver
	}
	var err error
	if here.groupWait, err = duration(r.GroupWait, parent.groupWait); err != nil {
		return nil, false, err
	}
	if here.groupInterval, err = duration(r.GroupInterval, parent.groupInterval); err != nil {
		return nil, false, err
	}
	var hits []routeHit
	for _, child := range r.Routes {
		got, ok, err := route(child, here, labels)
		if err != nil {
			return nil, false, err
		}
		hits = append(hits, got...)
		if ok && !child.Continue {
			break
		}
	}
	if len(hits) == 0 {
		hits = []routeHit{here}
	}
	return hits, true, nil
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// alertLabels are the labels an alert of rule r carries (job, instance and
// name come from the series).
func alertLabels(alert string, ruleLabels map[string]string) map[string]string {
	l := map[string]string{"alertname": alert, "job": "gpuguard", "instance": "gpu-host-1:9464", "name": "llama"}
	for k, v := range ruleLabels {
		l[k] = v
	}
	return l
}

// TestAlertDeliveryWithin5Minutes computes, from prometheus.yml,
// alerts.yml and alertmanager.yml, the latest an OOM fallback can reach the
// on-call receiver: the sample waits up to a scrape interval, the rule up
// to an evaluation interval, then its `for`; Alertmanager then holds a new
// group for group_wait, or, when the alert joins a group that has already
// notified, until the group's next flush (group_interval).
func TestAlertDeliveryWithin5Minutes(t *testing.T) {
	var prom promConfig
	readYAML(t, promConfigFile, &prom)
	var am struct {
		Route amRoute `yaml:"route"`
	}
	readYAML(t, amConfigFile, &am)

	must := func(d time.Duration, err error) time.Duration {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	// Prometheus' and Alertmanager's defaults where a file is silent.
	scrape := must(duration(prom.Global.ScrapeInterval, time.Minute))
	eval := must(duration(prom.Global.EvaluationInterval, time.Minute))
	job := slices.IndexFunc(prom.ScrapeConfigs, func(c scrapeConfig) bool { return c.JobName == "gpuguard" })
	if job < 0 {
		t.Fatalf("%s scrapes no job gpuguard", promConfigFile)
	}
	scrape = must(duration(prom.ScrapeConfigs[job].ScrapeInterval, scrape))
	root := routeHit{groupWait: 30 * time.Second, groupInterval: 5 * time.Minute}

	found := false
	for _, g := range readRules(t).Groups {
		groupEval := must(duration(g.Interval, eval))
		for _, r := range g.Rules {
			hits, _, err := route(am.Route, root, alertLabels(r.Alert, r.Labels))
			if err != nil {
				t.Fatalf("%s: %v", amConfigFile, err)
			}
			forDur := must(duration(r.For, 0))
			for _, h := range hits {
				worst := scrape + groupEval + forDur + max(h.groupWait, h.groupInterval)
				t.Logf("%-30s -> %-10s at worst %v = scrape %v + eval %v + for %v + max(group_wait %v, group_interval %v)",
					r.Alert, h.receiver, worst, scrape, groupEval, forDur, h.groupWait, h.groupInterval)
				if r.Alert != oomAlert {
					continue
				}
				if h.receiver != oncall {
					t.Errorf("%s goes to %q, want %q", oomAlert, h.receiver, oncall)
					continue
				}
				found = true
				if worst > deliveryBudget {
					t.Errorf("%s reaches on call %v after the fallback at worst, over %v", oomAlert, worst, deliveryBudget)
				}
			}
		}
	}
	if !found {
		t.Errorf("no %s alert routed to %s", oomAlert, oncall)
	}
}

// TestRouter keeps the test's router honest on the cases the bound relies on.
func TestRouter(t *testing.T) {
	tree := amRoute{Receiver: "chat", GroupWait: "30s", Routes: []amRoute{
		{Receiver: "pager", Matchers: []string{`severity="critical"`}, GroupWait: "10s", GroupInterval: "1m"},
		{Receiver: "db", Matchers: []string{`alertname=~"DB.*"`}, Continue: true},
		{Receiver: "db2", Matchers: []string{`alertname!~"DBX"`, `team!=db`}},
	}}
	root := routeHit{groupWait: time.Minute, groupInterval: 5 * time.Minute}
	for _, tc := range []struct {
		labels map[string]string
		want   []routeHit
	}{
		{map[string]string{"severity": "critical", "alertname": "DBDown"}, []routeHit{{"pager", 10 * time.Second, time.Minute}}},
		{map[string]string{"severity": "warning", "alertname": "DBDown"}, []routeHit{{"db", 30 * time.Second, 5 * time.Minute}, {"db2", 30 * time.Second, 5 * time.Minute}}},
		{map[string]string{"alertname": "DBX", "team": "db"}, []routeHit{{"db", 30 * time.Second, 5 * time.Minute}}},
		{map[string]string{"alertname": "Other", "team": "db"}, []routeHit{{"chat", 30 * time.Second, 5 * time.Minute}}},
	} {
		got, _, err := route(tree, root, tc.labels)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("route(%v) = %v, %v; want %v", tc.labels, got, err, tc.want)
		}
	}
	if _, _, err := route(amRoute{Match: map[string]string{"a": "b"}}, root, nil); err == nil {
		t.Error("match: accepted")
	}
	if _, _, err := route(amRoute{Matchers: []string{"not a matcher"}}, root, nil); err == nil {
		t.Error("a malformed matcher was accepted")
	}
}

// TestAmtool runs Alertmanager's own checker where amtool is installed
// (Debian: prometheus-alertmanager) and asks it where each alert goes,
// which must agree with the router the delivery bound uses.
func TestAmtool(t *testing.T) {
	amtool, err := exec.LookPath("amtool")
	if err != nil {
		t.Skip("amtool not installed (Debian package prometheus-alertmanager)")
	}
	if out, err := exec.Command(amtool, "check-config", amConfigFile).CombinedOutput(); err != nil {
		t.Fatalf("amtool check-config: %v\n%s", err, out)
	}
	var am struct {
		Route amRoute `yaml:"route"`
	}
	readYAML(t, amConfigFile, &am)
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			labels := alertLabels(r.Alert, r.Labels)
			hits, _, err := route(am.Route, routeHit{}, labels)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, h := range hits {
				want = append(want, h.receiver)
			}
			args := []string{"config", "routes", "test", "--config.file=" + amConfigFile}
			for k, v := range labels {
				args = append(args, k+"="+v)
			}
			out, err := exec.Command(amtool, args...).Output()
			if err != nil {
				t.Fatalf("amtool %s: %v", strings.Join(args, " "), err)
			}
			got := strings.FieldsFunc(string(out), func(r rune) bool { return r == ',' || r == ' ' || r == '\n' })
			if !slices.Equal(got, want) {
				t.Errorf("%s (%v): amtool routes it to %v, the test's router to %v", r.Alert, labels, got, want)
			}
		}
	}
}
