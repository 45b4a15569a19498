package policy

import (
	"path/filepath"
	"testing"

	"github.com/gpuguard/gpuguard/internal/backends"
)

// TestShippedPolicies keeps the demo policy and the examples parsing as the
// schema evolves.
func TestShippedPolicies(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "examples", "policies", "*.toml"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join("..", "policy.toml"))
	if len(files) < 3 {
		t.Fatalf("found only %v", files)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			p, err := Load(f, contractBackends())
			if err != nil {
				t.Fatal(err)
			}
			if p.Name == "" || len(p.Command) == 0 || len(p.Profiles) < 2 {
				t.Errorf("an example should name itself, its command and a ladder: %+v", p)
			}
		})
	}
}

func TestDemoPolicy(t *testing.T) {
	p, err := Load(filepath.Join("..", "policy.toml"), contractBackends())
	if err != nil {
		t.Fatal(err)
	}
	if p.Watch.Backend != backends.Sim || p.Name != "demo" {
		t.Errorf("the demo runs on the sim backend as \"demo\": %+v", p.Watch)
	}
	const total = 16 << 30 // the sim GPU's default size
	if !p.Fits(0, 0, total) {
		t.Error("the best profile must fit an empty 16 GiB sim GPU")
	}
	for _, prof := range p.Profiles {
		for _, k := range []string{"DTYPE", "MAX_BATCH", "KV_CACHE_MB"} {
			if prof.Env[k] == "" {
				t.Errorf("profile %s lacks %s, which the demo server reads", prof.Name, k)
			}
		}
	}
}
