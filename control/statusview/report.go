package statusview

import (
	"encoding/json"
	"io"
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

// WriteJSON writes r as one document: indented for a single snapshot,
// compact (one line per snapshot, JSON Lines) for --watch.
func WriteJSON(w io.Writer, r Report, compact bool) error {
	if r.Instances == nil {
		r.Instances = []api.Status{}
	}
	if r.GPUs == nil {
		r.GPUs = []api.GPU{}
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
