// Package deploy holds no code. It is where the monitoring that ships with
// gpuguard lives (prometheus/alerts.yml, grafana/gpuguard.json, and example
// prometheus.yml and alertmanager/alertmanager.yml), and its tests check the
// rules and the dashboard against the series a real metrics registry
// exposes, so a renamed metric or a label typo fails here instead of
// silently never alerting. They also compute, from the three configuration
// files, how late an OOM fallback can reach on call at worst, and fail above
// 5 minutes. TestExportSeries hands the list of series to the Kubernetes
// validation (kubernetes/validate, a module of its own), which checks the
// manifests' rules and autoscaling against it.
package deploy
