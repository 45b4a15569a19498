// Package bench holds end-to-end benchmarks of the real gpuguard binary on
// the simulated GPU: detection latency, idle cost, restart latency, the
// control socket and `gpuguard status` with many instances. The benchmarks
// measure and report (median, p99, max); they assert no timing. The
// binaries are built only when benchmarks run, so `go test ./...` stays
// cheap:
//
//	go test ./bench -run '^$' -bench . -benchtime 1x
//
// scripts/bench.sh runs these and the package benchmarks and prints a
// summary; docs/performance.md records the figures.
package bench
