package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpuguard/gpuguard/internal/drm/drmtest"
)

// The DRM backend end to end, on fake sysfs and procfs trees that
// GPUGUARD_SYSFS and GPUGUARD_PROCFS point the real binary at.

// drmTree writes two fake MI300X at PCI 85:00.0 (KFD node 1) and 15:00.0
// (KFD node 2): ROCm's index 0 is the one with the higher PCI address.
func drmTree(t *testing.T, e *env) (env []string, sysfs string) {
	t.Helper()
	sysfs, procfs := e.path("sys"), e.path("proc")
	err := drmtest.WriteSysfs(sysfs, []drmtest.GPU{
		{Card: 1, PCI: "0000:85:00.0", Name: "AMD Instinct MI300X", Total: 192 << 30, Used: 8 << 30, UniqueID: 0x5b3edde6585fcf08, GPUID: 54321},
		{Card: 0, PCI: "0000:15:00.0", Name: "AMD Instinct MI300X", Total: 192 << 30, Used: 1 << 30, GPUID: 12345},
	})
	if err == nil {
		err = drmtest.WriteProc(procfs, 4100, []drmtest.Client{{FD: 5, PDev: "0000:85:00.0", ID: "7", VRAM: "2 GiB"}})
	}
	if err == nil {
		err = drmtest.WriteKFD(sysfs, 4200, 12345, 512<<20)
	}
	if err != nil {
		t.Fatal(err)
	}
	return []string{"GPUGUARD_SYSFS=" + sysfs, "GPUGUARD_PROCFS=" + procfs}, sysfs
}

// statusGPUs runs `gpuguard status --json` with extra args and env.
func statusGPUs(t *testing.T, e *env, args []string, env ...string) []map[string]any {
	t.Helper()
	code, out, stderr := e.run(append([]string{"status", "--json", "--runtime-dir", e.runDir}, args...), env...)
	if code != 0 {
		t.Fatalf("status: exit %d\n%s", code, stderr)
	}
	var r struct {
		GPUs []map[string]any `json:"gpus"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	return r.GPUs
}

// TestDRMStatus: with no instance, `status --backend drm` shows the fake
// GPUs in ROCm's order, with ROCm's UUID (else the PCI address), memory
// and processes (fdinfo and KFD); ROCR_VISIBLE_DEVICES selects.
func TestDRMStatus(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	env, _ := drmTree(t, e)
	gpus := statusGPUs(t, e, []string{"--backend", "drm"}, env...)
	if len(gpus) != 2 {
		t.Fatalf("gpus %v", gpus)
	}
	g0, g1 := gpus[0], gpus[1]
	if g0["uuid"] != "GPU-5B3EDDE6585FCF08" || g0["name"] != "AMD Instinct MI300X" || g0["used_bytes"] != float64(8<<30) ||
		g0["total_bytes"] != float64(192<<30) || g1["uuid"] != "0000:15:00.0" {
		t.Errorf("gpus %v", gpus)
	}
	if p := g0["processes"].([]any)[0].(map[string]any); p["pid"] != 4100.0 || p["used_bytes"] != float64(2<<30) {
		t.Errorf("GPU 0's processes %v, want pid 4100 with 2 GiB (fdinfo)", g0["processes"])
	}
	if p := g1["processes"].([]any)[0].(map[string]any); p["pid"] != 4200.0 || p["used_bytes"] != float64(512<<20) {
		t.Errorf("GPU 1's processes %v, want pid 4200 with 512 MiB (KFD)", g1["processes"])
	}
	gpus = statusGPUs(t, e, []string{"--backend", "drm"}, append(env, "ROCR_VISIBLE_DEVICES=1")...)
	if len(gpus) != 1 || gpus[0]["uuid"] != "0000:15:00.0" {
		t.Errorf("ROCR_VISIBLE_DEVICES=1: %v", gpus)
	}
}

// TestDRMAuto: without NVML (as on this machine), auto picks DRM.
func TestDRMAuto(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if code, _, _ := e.run(append([]string{"run", "--backend", "nvml"}, sh("true")...)); code != 69 {
		t.Skip("NVML works here: auto would pick it")
	}
	env, _ := drmTree(t, e)
	gpus := statusGPUs(t, e, []string{"--backend", "auto"}, env...)
	if len(gpus) != 2 || gpus[0]["uuid"] != "GPU-5B3EDDE6585FCF08" {
		t.Errorf("auto: %v, want the DRM GPUs", gpus)
	}
	code, _, stderr := e.run(append([]string{"run", "--backend", "auto"}, sh("true")...), "GPUGUARD_SYSFS="+e.path("nothing"))
	if code != 69 || !strings.Contains(stderr, "NVML") || !strings.Contains(stderr, "DRM") || !strings.Contains(stderr, "--backend sim") {
		t.Errorf("auto with neither: exit %d\n%s", code, stderr)
	}
}

// TestDRMStepDown: a policy with backend "drm" watches the fake GPU; when
// its mem_info_vram_used passes high, the child steps down live.
func TestDRMStepDown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	env, sysfs := drmTree(t, e)
	pol := e.policy(strings.Replace(ladder, `backend = "sim"`, `backend = "drm"`, 1))
	script := `trap 'cat "$GPUGUARD_STATE" > "$OUT.state"; echo stepped; exit 0' USR1; echo up; while :; do sleep 0.02; done`
	p := e.start(append([]string{"run", "--policy", pol, "--name", "amd", "--devices", "GPU-5B3E"}, sh(script)...), env...)
	p.expect("up")
	gpus := statusGPUs(t, e, []string{"amd"})
	if len(gpus) != 1 || gpus[0]["uuid"] != "GPU-5B3EDDE6585FCF08" {
		t.Errorf("the instance watches %v, want GPU-5B3EDDE6585FCF08", gpus)
	}
	if err := drmtest.SetUsed(sysfs, 1, 185<<30); err != nil {
		t.Fatal(err)
	}
	p.expect("stepped")
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, p.stderr.String())
	}
	if st := e.read(e.path("out.state")); !strings.Contains(st, `"profile":"int8"`) {
		t.Errorf("state file %s, want int8", st)
	}
	if d := events(e, "stepdown"); len(d) != 1 || !strings.Contains(d[0], `"reason":"watermark"`) {
		t.Errorf("stepdown events %q", d)
	}
}
