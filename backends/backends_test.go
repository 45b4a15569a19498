package backends

import (
	"slices"
	"testing"
)

// TestTable pins the names and their order (the contract's --backend list,
// and the order help and errors print) and the visible-devices variables.
func TestTable(t *testing.T) {
	if got, want := Names(), []string{"auto", "nvml", "drm", "sim", "npu-smi"}; !slices.Equal(got, want) {
		t.Errorf("Names() = %q, want %q", got, want)
	}
	if got, want := List(), "auto, nvml, drm, sim or npu-smi"; got != want {
		t.Errorf("List() = %q, want %q", got, want)
	}
	for name, want := range map[string][]string{
		Auto:   {"CUDA_VISIBLE_DEVICES"},
		NVML:   {"CUDA_VISIBLE_DEVICES"},
		DRM:    {"ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"},
		Sim:    nil,
		NPUSMI: {"ASCEND_RT_VISIBLE_DEVICES"},
	} {
		b, ok := Lookup(name)
		if !ok || !slices.Equal(b.Visible, want) {
			t.Errorf("Lookup(%q) = %+v %v, want Visible %q", name, b, ok, want)
		}
	}
	if _, ok := Lookup("cuda"); ok {
		t.Error(`Lookup("cuda") found a backend`)
	}
}

// TestTableIsACopy: a caller that edits what Table returns changes nothing
// for the next caller.
func TestTableIsACopy(t *testing.T) {
	tb := Table()
	tb[0].Name = "changed"
	tb[2].Visible[0] = "CHANGED"
	if b, _ := Lookup(DRM); Names()[0] != Auto || b.Visible[0] != "ROCR_VISIBLE_DEVICES" {
		t.Error("editing Table's result changed the table")
	}
}
