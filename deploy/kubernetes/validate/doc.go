// Package validate checks the Kubernetes manifests in deploy/kubernetes
// without a cluster: there is none, and no container runtime, on the
// machines this project is developed and tested on.
//
// It is a Go module of its own so that the gpuguard binary's go.mod never
// requires a Kubernetes module. Its tests build every kustomization with
// sigs.k8s.io/kustomize/api, decode every object strictly into its typed API
// struct (k8s.io/api, prometheus-operator's monitoring types), run
// `gpuguard policy check` on the policy ConfigMap, run the Deployment's own
// gpuguard command line on the simulated GPU and scrape it, run promtool on
// the rules, and check the canary ratio and every PromQL expression against
// the series gpuguard exports (the root module's deploy package writes them:
// its TestExportSeries).
//
// The checks are pure functions over decoded objects, each with a table
// test of the mistakes it must catch; the tests that need the repository
// (kustomize builds, the gpuguard binary, promtool) are in validate_test.go.
//
// base/common/prometheusrule.yaml is generated from
// deploy/prometheus/alerts.yml; regenerate it after editing the alerts with
//
//	go generate ./...
//
// in this directory. TestPrometheusRuleIsGenerated fails until then.
package validate

//go:generate go run ./cmd/genrule -alerts ../../prometheus/alerts.yml -out ../base/common/prometheusrule.yaml
