package validate

import (
	"fmt"
	"regexp"
	"strings"
	"text/template"

	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

// AdapterConfig is prometheus-adapter's configuration file, the part these
// manifests use: its discovery rules for the custom metrics API. The field
// names follow sigs.k8s.io/prometheus-adapter pkg/config (a module too
// heavy to import for its types); decoding is strict, so a misspelt field
// fails here instead of being ignored by the adapter.
type AdapterConfig struct {
	Rules []AdapterRule `json:"rules"`
}

// AdapterRule is one discovery rule.
type AdapterRule struct {
	SeriesQuery   string `json:"seriesQuery"`
	SeriesFilters []struct {
		Is    string `json:"is,omitempty"`
		IsNot string `json:"isNot,omitempty"`
	} `json:"seriesFilters,omitempty"`
	Resources struct {
		Template  string                          `json:"template,omitempty"`
		Overrides map[string]AdapterGroupResource `json:"overrides,omitempty"`
	} `json:"resources"`
	Name struct {
		Matches string `json:"matches"`
		As      string `json:"as,omitempty"`
	} `json:"name"`
	MetricsQuery string `json:"metricsQuery"`
}

// AdapterGroupResource is the Kubernetes resource a label stands for.
type AdapterGroupResource struct {
	Group    string `json:"group,omitempty"`
	Resource string `json:"resource"`
}

// ParseAdapterConfig decodes the adapter's config.yaml strictly.
func ParseAdapterConfig(text string) (AdapterConfig, error) {
	var cfg AdapterConfig
	if err := yaml.UnmarshalStrict([]byte(text), &cfg); err != nil {
		return cfg, fmt.Errorf("prometheus-adapter config: %w", err)
	}
	return cfg, nil
}

// AdapterMetric is a metric the adapter serves to the HPA.
type AdapterMetric struct {
	Series string // the Prometheus series it comes from
	PerPod bool   // the rule maps a label to pods
}

// MetricName is the name the adapter gives series under rule: name.as
// expanded from the name.matches match ($0 by default, $1 when the
// expression has one group, as the adapter does).
func (r AdapterRule) MetricName(series string) (string, error) {
	re, err := regexp.Compile(r.Name.Matches)
	if err != nil {
		return "", fmt.Errorf("name.matches %q: %w", r.Name.Matches, err)
	}
	m := re.FindStringSubmatchIndex(series)
	if m == nil {
		return "", fmt.Errorf("name.matches %q does not match %s", r.Name.Matches, series)
	}
	as := r.Name.As
	if as == "" {
		switch re.NumSubexp() {
		case 0:
			as = "$0"
		case 1:
			as = "$1"
		default:
			return "", fmt.Errorf("name.matches %q has several groups: name.as is required", r.Name.Matches)
		}
	}
	return string(re.ExpandString(nil, as, series, m)), nil
}

// RenderMetricsQuery fills the metricsQuery template as the adapter does
// (delimiters << >>), for one pod of namespace "default".
func (r AdapterRule) RenderMetricsQuery(series string) (string, error) {
	t, err := template.New("metricsQuery").Delims("<<", ">>").Parse(r.MetricsQuery)
	if err != nil {
		return "", fmt.Errorf("metricsQuery: %w", err)
	}
	var b strings.Builder
	// A struct, as in the adapter, so that a misspelt field is an error.
	err = t.Execute(&b, struct {
		Series        string
		LabelMatchers string
		GroupBy       string
		GroupBySlice  []string
	}{series, `namespace="default",pod=~"vllm-0|vllm-1"`, "pod", []string{"pod"}})
	if err != nil {
		return "", fmt.Errorf("metricsQuery: %w", err)
	}
	return b.String(), nil
}

// CheckAdapter checks every rule's queries against the series that exist
// and returns the metrics the rules serve, by name.
func CheckAdapter(cfg AdapterConfig, c *Checker) (map[string]AdapterMetric, []error) {
	out := map[string]AdapterMetric{}
	var errs []error
	for i, r := range cfg.Rules {
		fail := func(err error) { errs = append(errs, fmt.Errorf("adapter rule %d (%s): %w", i+1, r.SeriesQuery, err)) }
		e, err := c.Parse(r.SeriesQuery)
		if err != nil {
			fail(err)
			continue
		}
		vs, ok := e.(*parser.VectorSelector)
		if !ok || vs.Name == "" {
			fail(fmt.Errorf("seriesQuery must be a selector with a metric name"))
			continue
		}
		for _, err := range c.Check(r.SeriesQuery) {
			fail(err)
		}
		name, err := r.MetricName(vs.Name)
		if err != nil {
			fail(err)
			continue
		}
		q, err := r.RenderMetricsQuery(vs.Name)
		if err != nil {
			fail(err)
			continue
		}
		for _, err := range c.Check(q) {
			fail(err)
		}
		perPod := false
		for label, gr := range r.Resources.Overrides {
			if _, ok := c.Scrape[label]; !ok {
				fail(fmt.Errorf("resources.overrides: label %q is not on scraped series", label))
			}
			perPod = perPod || gr.Resource == "pod" || gr.Resource == "pods"
		}
		if _, dup := out[name]; dup {
			fail(fmt.Errorf("metric %s is served by two rules", name))
		}
		out[name] = AdapterMetric{Series: vs.Name, PerPod: perPod}
	}
	return out, errs
}
