package door

import (
	"net/http"
	"strings"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// The paths the door answers itself, from its table (GET and HEAD only).
const (
	pathModels     = "/v1/models"   // OpenAI's list, and /v1/models/NAME
	pathTags       = "/api/tags"    // Ollama's list
	pathPS         = "/api/ps"      // Ollama's loaded models: the ready ones
	pathVersion    = "/api/version" // Open WebUI checks an Ollama connection with it
	pathDoorModels = "/gpuguard/v1/models"
)

// isListing reports whether the door answers r itself.
func isListing(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	switch p := r.URL.Path; p {
	case pathModels, pathTags, pathPS, pathVersion, pathDoorModels:
		return true
	default:
		return strings.HasPrefix(p, pathModels+"/")
	}
}

// list answers a listing from t and returns the request's model label.
func (d *Door) list(w http.ResponseWriter, r *http.Request, t *Table) string {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	switch p := r.URL.Path; {
	case p == pathModels:
		list := openAIList{Object: "list", Data: []openAIModel{}}
		for _, name := range t.Names() {
			list.Data = append(list.Data, openAIEntry(t, name))
		}
		writeJSON(w, http.StatusOK, list)
	case strings.HasPrefix(p, pathModels+"/"):
		name := strings.TrimPrefix(p, pathModels+"/")
		if !t.Has(name) {
			modelNotFound(w, name)
			return unknownModel
		}
		writeJSON(w, http.StatusOK, openAIEntry(t, name))
		return name
	case p == pathTags, p == pathPS:
		tags := ollamaList{Models: []ollamaModel{}}
		for _, name := range t.Names() {
			b := t.Pick(name)
			if p == pathPS && b.State() != "ready" {
				continue
			}
			tags.Models = append(tags.Models, ollamaEntry(name, b))
		}
		writeJSON(w, http.StatusOK, tags)
	case p == pathVersion:
		writeJSON(w, http.StatusOK, map[string]string{"version": d.o.Version})
	case p == pathDoorModels:
		out := doorList{Models: []doorModel{}}
		for _, name := range t.Names() {
			m := doorModel{Name: name, Instances: []api.Status{}}
			for _, b := range t.Replicas(name) {
				m.Instances = append(m.Instances, b.Status.Public())
			}
			out.Models = append(out.Models, m)
		}
		writeJSON(w, http.StatusOK, out)
	}
	return unknownModel
}

// openAIList is GET /v1/models in OpenAI's shape; gpuguard adds, per
// name, the instance a request would go to now and its state.
type openAIList struct {
	Object string        `json:"object"`
	Data   []openAIModel `json:"data"`
}

type openAIModel struct {
	ID       string       `json:"id"`
	Object   string       `json:"object"`
	Created  int64        `json:"created"`
	OwnedBy  string       `json:"owned_by"`
	GPUGuard modelSummary `json:"gpuguard"`
}

type modelSummary struct {
	Instance  string   `json:"instance"`
	State     string   `json:"state"`
	Profile   string   `json:"profile"`
	Instances []string `json:"instances"` // every replica, by name
}

func openAIEntry(t *Table, name string) openAIModel {
	b := t.Pick(name)
	s := modelSummary{Instance: b.Name, State: b.State(), Profile: b.Status.Profile}
	for _, r := range t.Replicas(name) {
		s.Instances = append(s.Instances, r.Name)
	}
	return openAIModel{ID: name, Object: "model", Created: started(b).Unix(), OwnedBy: "gpuguard", GPUGuard: s}
}

// started is when b's instance started, from its uptime.
func started(b *Backend) time.Time {
	return b.seen.Add(-time.Duration(b.Status.UptimeSeconds * float64(time.Second))).Truncate(time.Second)
}

// ollamaList is GET /api/tags (and /api/ps) in Ollama's shape.
type ollamaList struct {
	Models []ollamaModel `json:"models"`
}

type ollamaModel struct {
	Name       string        `json:"name"`
	Model      string        `json:"model"`
	ModifiedAt time.Time     `json:"modified_at"`
	Size       int64         `json:"size"`
	Digest     string        `json:"digest"`
	Details    ollamaDetails `json:"details"`
}

type ollamaDetails struct {
	Format            string `json:"format"`
	Family            string `json:"family"`
	ParameterSize     string `json:"parameter_size"`
	QuantizationLevel string `json:"quantization_level"`
}

func ollamaEntry(name string, b *Backend) ollamaModel {
	return ollamaModel{Name: name, Model: name, ModifiedAt: started(b).UTC()}
}

// doorList is GET /gpuguard/v1/models: each name with its instances'
// status objects.
type doorList struct {
	Models []doorModel `json:"models"`
}

type doorModel struct {
	Name      string       `json:"name"`
	Instances []api.Status `json:"instances"`
}
