package validate

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// Build runs kustomize on the kustomization in dir, on the real filesystem
// and with kustomize's default options (files only from inside each
// kustomization's root, no plugins), as `kubectl apply -k dir` would, and
// returns each object as JSON.
func Build(dir string) ([][]byte, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	var out [][]byte
	for _, r := range m.Resources() {
		b, err := r.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("kustomize build %s: %s: %w", dir, r.CurId(), err)
		}
		out = append(out, b)
	}
	return out, nil
}

// Kustomization is one kustomization.yaml found under the tree.
type Kustomization struct {
	Dir       string // its directory
	Rel       string // Dir relative to the tree's root
	Component bool   // kind: Component, which builds only inside another kustomization
}

// Entry reports whether users apply this kustomization as it is: base,
// an overlay directly under overlays/, or a component (on top of base).
// The others are parts of those (base/common, overlays/canary/enforce):
// they must build and decode, but only the whole is checked as a workload.
func (k Kustomization) Entry() bool {
	return k.Component || k.Rel == "base" ||
		strings.HasPrefix(k.Rel, "overlays/") && strings.Count(k.Rel, "/") == 1
}

// FindKustomizations lists every kustomization under root, so that a new
// overlay is validated without being named anywhere.
func FindKustomizations(root string) ([]Kustomization, error) {
	var out []Kustomization
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !isKustomizationFile(d.Name()) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var head struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal(b, &head); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		dir := filepath.Dir(path)
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			return err
		}
		out = append(out, Kustomization{Dir: dir, Rel: filepath.ToSlash(rel), Component: head.Kind == "Component"})
		return nil
	})
	return out, err
}

func isKustomizationFile(name string) bool {
	switch strings.ToLower(name) {
	case "kustomization.yaml", "kustomization.yml", "kustomization":
		return true
	}
	return false
}

// Build builds k as a user would apply it: a component on top of the
// base/ beside its components/ directory, through an overlay written into
// tmp.
func (k Kustomization) Build(root, tmp string) ([][]byte, error) {
	if !k.Component {
		return Build(k.Dir)
	}
	if err := ComposeOverlay(tmp, filepath.Join(root, "base"), k.Dir); err != nil {
		return nil, err
	}
	return Build(tmp)
}

// ComposeOverlay writes, into dir, a kustomization that puts component on
// top of base, for building a component the way a user's overlay would.
// kustomize takes only relative paths to other kustomizations.
func ComposeOverlay(dir, base, component string) error {
	var err error
	if base, err = filepath.Rel(dir, base); err != nil {
		return err
	}
	if component, err = filepath.Rel(dir, component); err != nil {
		return err
	}
	k := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - %s\ncomponents:\n  - %s\n", base, component)
	return os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644)
}
