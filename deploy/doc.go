// Package deploy holds no code. It is where the monitoring that ships with
// gpuguard lives (prometheus/alerts.yml, grafana/gpuguard.json), and its
// test checks both against the series a real metrics registry exposes, so
// a renamed metric or a label typo fails here instead of silently never
// alerting. TestExportSeries hands the same list of series to the
// Kubernetes validation (kubernetes/validate, a module of its own), which
// checks the manifests' rules and autoscaling against it.
package deploy
