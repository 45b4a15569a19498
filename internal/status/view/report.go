package view

import (
	"cmp"
	"encoding/json"
	"io"
	"slices"
	"sort"
	"strconv"

	"github.com/gpuguard/gpuguard/api"
)

// Report is the output of `gpuguard status --json`.
type Report struct {
	Instances []api.Status `json:"instances"`
	GPUs      []api.GPU    `json:"gpus"`
}

// UnionGPUs merges the instances' GPUs by UUID (by index when a backend
// reports none). When two instances watch the same GPU, the first one's
// sample is shown: they differ only by when they were taken.
func UnionGPUs(sts []api.Status) []api.GPU {
	seen := map[string]bool{}
	out := []api.GPU{}
	for _, st := range sts {
		for _, g := range st.GPUs {
			key := "uuid:" + g.UUID
			if g.UUID == "" {
				key = "index:" + strconv.Itoa(g.Index)
			}
			if !seen[key] {
				seen[key] = true
				out = append(out, g)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Index != out[j].Index {
			return out[i].Index < out[j].Index
		}
		return out[i].UUID < out[j].UUID
	})
	return out
}

// WithTenants sets every GPU's Tenants: the instances that answered and
// watch it (by UUID; by index for a GPU without one), lowest priority
// first, ties by name. A GPU nobody watches gets an empty list.
func WithTenants(gpus []api.GPU, sts []api.Status) []api.GPU {
	out := make([]api.GPU, len(gpus))
	for i, g := range gpus {
		var ts []api.Status
		for _, st := range sts {
			if st.State != api.StateUnreachable && slices.ContainsFunc(st.GPUs, func(w api.GPU) bool { return sameGPU(w, g) }) {
				ts = append(ts, st)
			}
		}
		slices.SortStableFunc(ts, func(a, b api.Status) int {
			return cmp.Or(cmp.Compare(a.Priority, b.Priority), cmp.Compare(a.Name, b.Name))
		})
		g.Tenants = make([]string, 0, len(ts))
		for _, st := range ts {
			g.Tenants = append(g.Tenants, st.Name)
		}
		out[i] = g
	}
	return out
}

func sameGPU(a, b api.GPU) bool {
	if a.UUID != "" || b.UUID != "" {
		return a.UUID == b.UUID
	}
	return a.Index == b.Index
}

// WriteJSON writes r as one document: indented for a single snapshot,
// compact (one line per snapshot, JSON Lines) for --watch.
func WriteJSON(w io.Writer, r Report, compact bool) error {
	if r.Instances == nil {
		r.Instances = []api.Status{}
	}
	if r.GPUs == nil {
		r.GPUs = []api.GPU{}
	}
	// Every top-level GPU carries its tenants, [] when none.
	r.GPUs = slices.Clone(r.GPUs)
	for i := range r.GPUs {
		if r.GPUs[i].Tenants == nil {
			r.GPUs[i].Tenants = []string{}
		}
	}
	for i := range r.Instances {
		if r.Instances[i].GPUs == nil {
			r.Instances[i].GPUs = []api.GPU{}
		}
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // "watermark 0.93 > 0.90", not \u003e
	if !compact {
		enc.SetIndent("", "  ")
	}
	return enc.Encode(r)
}
