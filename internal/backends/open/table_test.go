package open

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpuguard/gpuguard/internal/backends"
	"github.com/gpuguard/gpuguard/policy"
)

// TestTable pins the names and their order (the contract's --backend list,
// and the order help and errors print) and the visible-devices variables,
// and fails for a row without an opener or a name given twice.
func TestTable(t *testing.T) {
	if got, want := Names(), []string{"auto", "nvml", "drm", "sim", "npu-smi"}; !slices.Equal(got, want) {
		t.Errorf("Names() = %q, want %q", got, want)
	}
	if got, want := List(), "auto, nvml, drm, sim or npu-smi"; got != want {
		t.Errorf("List() = %q, want %q", got, want)
	}
	seen := map[string]bool{}
	for _, b := range Table() {
		if b.Open == nil {
			t.Errorf("backend %q has no opener", b.Name)
		}
		if b.Name == "" || seen[b.Name] {
			t.Errorf("backend name %q empty or given twice", b.Name)
		}
		seen[b.Name] = true
		if len(b.Visible) > 1 && b.ReadVisible == nil {
			t.Errorf("backend %q has %d visible-devices variables and no ReadVisible to combine them", b.Name, len(b.Visible))
		}
	}
	for name, want := range map[string][]string{
		backends.Auto:   {"CUDA_VISIBLE_DEVICES"},
		backends.NVML:   {"CUDA_VISIBLE_DEVICES"},
		backends.DRM:    {"ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"},
		backends.Sim:    nil,
		backends.NPUSMI: {"ASCEND_RT_VISIBLE_DEVICES"},
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
	if b, _ := Lookup(backends.DRM); Names()[0] != backends.Auto || b.Visible[0] != "ROCR_VISIBLE_DEVICES" {
		t.Error("editing Table's result changed the table")
	}
}

// TestPolicyTakesTheTable: with the option cmd passes, [watch] backend
// takes every row's name and refuses another naming them all; policy's
// default is a row.
func TestPolicyTakesTheTable(t *testing.T) {
	opt := policy.Backends(Names()...)
	for _, name := range Names() {
		p, err := policy.Parse([]byte("[watch]\nbackend = \""+name+"\"\n"), "p.toml", opt)
		if err != nil || p.Watch.Backend != name {
			t.Errorf("backend %q: %v", name, err)
		}
	}
	_, err := policy.Parse([]byte("[watch]\nbackend = \"cuda\"\n"), "p.toml", opt)
	if err == nil {
		t.Fatal("backend cuda accepted")
	}
	for _, name := range Names() {
		if !strings.Contains(err.Error(), `"`+name+`"`) {
			t.Errorf("error %q does not name %q", err, name)
		}
	}
	if _, ok := Lookup(policy.Default().Watch.Backend); !ok {
		t.Errorf("policy's default backend %q is not a row", policy.Default().Watch.Backend)
	}
}
