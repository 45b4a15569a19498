package validate

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// Series is what gpuguard's metrics registry exposes: family name -> label
// -> the values seen, and the labels whose values gpuguard does not fix.
// The root module's deploy package writes it (TestExportSeries), from the
// same registry its alert-rule and dashboard checks use.
type Series struct {
	Metrics    map[string]map[string][]string `json:"series"`
	FreeLabels []string                       `json:"free_labels"`
}

// LoadSeries reads the file TestExportSeries wrote.
func LoadSeries(file string) (Series, error) {
	var s Series
	b, err := os.ReadFile(file)
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("%s: %w", file, err)
	}
	if len(s.Metrics) == 0 {
		return s, fmt.Errorf("%s: no series", file)
	}
	return s, nil
}

// ForeignSeries are series the manifests use on purpose that gpuguard does
// not export, with where they come from. Nothing else may appear.
var ForeignSeries = map[string]string{
	"up": "Prometheus, one per target",
	"vllm:e2e_request_latency_seconds_bucket": "vLLM's /metrics, scraped by the same PodMonitor (port http)",
}

// Checker checks PromQL expressions against the series that exist: those
// gpuguard exports, the recording rules of the same build, and
// ForeignSeries. Labels must exist on the series they select (or be added
// by the scrape), and labels gpuguard enumerates (reason, decision, ...)
// must take values gpuguard uses.
type Checker struct {
	Series  Series
	Scrape  map[string][]string // label -> values; nil: any value (ScrapeLabels)
	Records map[string]bool

	parser parser.Parser
	known  map[string]bool
}

// NewChecker builds a Checker.
func NewChecker(s Series, scrape map[string][]string, records map[string]bool) *Checker {
	c := &Checker{Series: s, Scrape: scrape, Records: records, parser: parser.NewParser(parser.Options{}), known: map[string]bool{"le": true, "quantile": true}}
	for _, ls := range s.Metrics {
		for l := range ls {
			c.known[l] = true
		}
	}
	for l := range scrape {
		c.known[l] = true
	}
	return c
}

// Parse parses expr as PromQL, as Prometheus does.
func (c *Checker) Parse(expr string) (parser.Expr, error) { return c.parser.ParseExpr(expr) }

// Check returns every problem in expr.
func (c *Checker) Check(expr string) []error {
	e, err := c.Parse(expr)
	if err != nil {
		return []error{fmt.Errorf("%q: %w", oneLine(expr), err)}
	}
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%q: "+format, append([]any{oneLine(expr)}, args...)...))
	}
	checkLabels := func(what string, ls []string) {
		for _, l := range ls {
			if !c.known[l] {
				fail("%s names label %q, which no series has", what, l)
			}
		}
	}
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.VectorSelector:
			for _, err := range c.checkSelector(n) {
				fail("%v", err)
			}
		case *parser.AggregateExpr:
			checkLabels(n.Op.String(), n.Grouping)
		case *parser.BinaryExpr:
			if n.VectorMatching != nil {
				checkLabels("vector matching", n.VectorMatching.MatchingLabels)
				checkLabels("group_left/group_right", n.VectorMatching.Include)
			}
		}
		return nil
	})
	return errs
}

func (c *Checker) checkSelector(vs *parser.VectorSelector) []error {
	name := vs.Name
	for _, m := range vs.LabelMatchers {
		if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
			name = m.Value
		}
	}
	switch {
	case name == "":
		return []error{fmt.Errorf("a selector without a metric name")}
	case c.Records[name]:
		return nil
	case ForeignSeries[name] != "":
		return nil
	}
	ls, ok := c.Series.Metrics[name]
	if !ok {
		return []error{fmt.Errorf("unknown series %s: gpuguard does not export it and no recording rule here makes it", name)}
	}
	var errs []error
	for _, m := range vs.LabelMatchers {
		if m.Name == model.MetricNameLabel {
			continue
		}
		values, own := ls[m.Name]
		scrapeValues, scraped := c.Scrape[m.Name]
		switch {
		case own && !slices.Contains(c.Series.FreeLabels, m.Name):
			errs = append(errs, checkValues(name, m, values)...)
		case own:
		case scraped && scrapeValues != nil:
			errs = append(errs, checkValues(name, m, scrapeValues)...)
		case scraped:
		default:
			errs = append(errs, fmt.Errorf("%s has no label %q (has %v)", name, m.Name, slices.Sorted(maps.Keys(ls))))
		}
	}
	return errs
}

// checkValues checks a matcher on a label with known values: each value
// (each alternative of a regular expression) must be one of them. Matching
// the empty string (label present or absent) is always fine.
func checkValues(metric string, m *labels.Matcher, values []string) []error {
	if m.Value == "" {
		return nil
	}
	alts := []string{m.Value}
	if m.Type == labels.MatchRegexp || m.Type == labels.MatchNotRegexp {
		alts = strings.Split(m.Value, "|")
	}
	var errs []error
	for _, a := range alts {
		if !slices.Contains(values, a) {
			errs = append(errs, fmt.Errorf("%s{%s=%q}: no such value (has %v)", metric, m.Name, a, values))
		}
	}
	return errs
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
