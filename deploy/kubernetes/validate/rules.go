package validate

import (
	"fmt"
	"regexp"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"sigs.k8s.io/yaml"
)

// Records returns the names every recording rule in the set records.
func Records(s Set) map[string]bool {
	out := map[string]bool{}
	for _, pr := range s.Rules {
		for _, g := range pr.Spec.Groups {
			for _, r := range g.Rules {
				if r.Record != "" {
					out[r.Record] = true
				}
			}
		}
	}
	return out
}

// recordName is Prometheus's convention for recorded series,
// level:metric:operations.
var recordName = regexp.MustCompile(`^[a-zA-Z_]+:[a-zA-Z0-9_]+:[a-zA-Z0-9_]+$`)

// CheckRules checks every rule of every PrometheusRule: alert or record
// (not both), unique names, conventional record names, and expressions
// against the series that exist (Checker).
func CheckRules(s Set, c *Checker) []error {
	var errs []error
	recorded := map[string]string{}
	for _, pr := range s.Rules {
		groups := map[string]bool{}
		for _, g := range pr.Spec.Groups {
			if groups[g.Name] {
				errs = append(errs, fmt.Errorf("PrometheusRule %s: group %q twice", pr.Name, g.Name))
			}
			groups[g.Name] = true
			for _, r := range g.Rules {
				where := fmt.Sprintf("PrometheusRule %s, group %s, %s%s", pr.Name, g.Name, r.Alert, r.Record)
				switch {
				case (r.Alert == "") == (r.Record == ""):
					errs = append(errs, fmt.Errorf("%s: a rule needs exactly one of alert and record", where))
				case r.Record != "" && !recordName.MatchString(r.Record):
					errs = append(errs, fmt.Errorf("%s: record names read level:metric:operations", where))
				case r.Record != "" && recorded[r.Record] != "":
					errs = append(errs, fmt.Errorf("%s: also recorded in %s", where, recorded[r.Record]))
				}
				if r.Record != "" {
					recorded[r.Record] = where
				}
				for _, err := range c.Check(r.Expr.String()) {
					errs = append(errs, fmt.Errorf("%s: %w", where, err))
				}
			}
		}
	}
	return errs
}

// RuleFile is a PrometheusRule's groups as a Prometheus rule file, for
// promtool.
func RuleFile(pr *monitoringv1.PrometheusRule) ([]byte, error) {
	return yaml.Marshal(map[string]any{"groups": pr.Spec.Groups})
}
