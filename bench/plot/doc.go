// Command plot draws docs/sensing-ramp.svg from the trace that
// BenchmarkRampDetection writes with -ramp.trace: the watermark as the
// child wrote it, the samples gpuguard took as its status showed them,
// the polling period, and the step. It uses only the standard library, so
// the picture can be made again from the committed trace:
//
//	go run ./bench/plot docs/sensing-ramp.json docs/sensing-ramp.svg
package main
