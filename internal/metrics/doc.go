// Package metrics exposes one instance's state and history in the
// Prometheus text format.
//
// Gauges (GPU memory, watermark, profile level, whether a child runs) are
// read from a supervisor snapshot at scrape time rather than pushed on every
// tick, so a scrape costs the supervisor loop nothing and can never show a
// value older than the last snapshot. Counters are derived from the same
// events the journal records, so `gpuguard report` and the dashboards agree.
//
// Each instance has its own prometheus.Registry (never the default one):
// two supervisors in one process, or a test, cannot collide, and every series
// carries the label name=<instance> so a host running several instances can
// be scraped by one job.
//
// Endpoint serves the handler on the policy's listen address and moves it
// when a reload changes the address: the new address is bound before
// anything changes, so a port in use refuses the reload instead of leaving
// the instance without metrics.
package metrics
