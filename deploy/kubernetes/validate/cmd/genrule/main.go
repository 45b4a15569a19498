// Command genrule writes the PrometheusRule of deploy/kubernetes/base from
// deploy/prometheus/alerts.yml (go generate runs it; see the validate
// package).
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/gpuguard/gpuguard/deploy/kubernetes/validate"
)

func main() {
	alerts := flag.String("alerts", "", "the Prometheus rule file to read")
	out := flag.String("out", "", "the PrometheusRule manifest to write")
	flag.Parse()
	if *alerts == "" || *out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: genrule -alerts FILE -out FILE")
		os.Exit(64)
	}
	if err := run(*alerts, *out); err != nil {
		fmt.Fprintln(os.Stderr, "genrule:", err)
		os.Exit(1)
	}
}

func run(alerts, out string) error {
	in, err := os.ReadFile(alerts)
	if err != nil {
		return err
	}
	b, err := validate.RenderPrometheusRule(in)
	if err != nil {
		return fmt.Errorf("%s: %w", alerts, err)
	}
	if old, err := os.ReadFile(out); err == nil && bytes.Equal(old, b) {
		return nil
	}
	return os.WriteFile(out, b, 0o644)
}
