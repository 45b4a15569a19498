package validate

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// ruleHeader starts the generated PrometheusRule. The rule groups follow,
// copied from alerts.yml line by line, so that the two read the same.
const ruleHeader = `# Code generated from deploy/prometheus/alerts.yml by deploy/kubernetes/validate/cmd/genrule; DO NOT EDIT.
# Regenerate: (cd deploy/kubernetes/validate && go generate ./...)
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: gpuguard-alerts
  labels:
    app.kubernetes.io/name: gpuguard
spec:
`

// RenderPrometheusRule turns a Prometheus rule file into a PrometheusRule
// whose spec.groups are that file's groups. The text of the groups is kept
// as it is (comments included) and indented under spec, which leaves YAML's
// meaning unchanged, block scalars included; the test decodes both and
// compares them anyway. The file must hold nothing but `groups:`.
func RenderPrometheusRule(alerts []byte) ([]byte, error) {
	var top map[string]any
	if err := yaml.Unmarshal(alerts, &top); err != nil {
		return nil, fmt.Errorf("reading the alert rules: %w", err)
	}
	for k := range top {
		if k != "groups" {
			return nil, fmt.Errorf("alert rules: top-level key %q: a PrometheusRule holds only groups", k)
		}
	}
	var out bytes.Buffer
	out.WriteString(ruleHeader)
	found := false
	sc := bufio.NewScanner(bytes.NewReader(alerts))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !found {
			// Comments before groups: describe the plain file (how to
			// load it) and are left out.
			if found = strings.HasPrefix(line, "groups:"); !found {
				continue
			}
		}
		if strings.TrimSpace(line) == "" {
			out.WriteString("\n")
			continue
		}
		if strings.HasPrefix(line, "\t") {
			return nil, fmt.Errorf("alert rules: a line starts with a tab: %q", line)
		}
		out.WriteString("  " + line + "\n")
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("alert rules: no line starts with \"groups:\"")
	}
	return out.Bytes(), nil
}
