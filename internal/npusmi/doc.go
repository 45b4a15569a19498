// Package npusmi is the Huawei Ascend backend: a gpu.Probe that runs
// `npu-smi info` at every sample and parses its table (parse.go, tested on
// captured output in testdata/) into devices and processes. Ascend has no
// library gpuguard could call without cgo and the vendor's SDK, and
// npu-smi is on every host that runs Ascend cards, so the command is the
// interface; its run time (a noticeable fraction of a second) is why an
// interval of at least 500ms is advised with it.
package npusmi
