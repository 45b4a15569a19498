package validate

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// expect is what a kustomization must contain beyond the checks that apply
// to every one; a kustomization not listed here gets those checks alone.
var expect = map[string]struct {
	deployments, podMonitors, pdbs, services, hpas int
	canary                                         bool
	records                                        bool
}{
	"base":                    {deployments: 1, podMonitors: 1, pdbs: 1, services: 1},
	"overlays/canary":         {deployments: 2, podMonitors: 1, pdbs: 1, services: 1, canary: true, records: true},
	"overlays/hpa":            {deployments: 1, podMonitors: 1, pdbs: 1, services: 1, hpas: 1},
	"base/common":             {podMonitors: 1, pdbs: 1, services: 1},
	"base/workload":           {deployments: 1},
	"overlays/canary/enforce": {deployments: 1},
	"overlays/canary/observe": {deployments: 1},
}

// TestKustomizations builds every kustomization under deploy/kubernetes
// (and every component on top of base/) and validates the result.
func TestKustomizations(t *testing.T) {
	ks, err := FindKustomizations(kubeRoot)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := NewDecoder()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, k := range ks {
		seen[k.Rel] = true
		t.Run(k.Rel, func(t *testing.T) {
			objs, err := k.Build(kubeRoot, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			set, errs := dec.DecodeAll(objs)
			report(t, "decode", errs)
			checkKinds(t, k.Rel, set)
			if k.Entry() {
				validateBuild(t, k.Rel, set)
			}
		})
	}
	for rel := range expect {
		if !seen[rel] {
			t.Errorf("no kustomization at deploy/kubernetes/%s", rel)
		}
	}
}

// checkKinds checks that a shipped kustomization has what expect says.
func checkKinds(t *testing.T, rel string, set Set) {
	t.Helper()
	want := expect[rel]
	for _, c := range []struct {
		kind      string
		got, want int
	}{
		{"Deployment", len(set.Deployments), want.deployments},
		{"PodMonitor", len(set.PodMonitors), want.podMonitors},
		{"PodDisruptionBudget", len(set.PDBs), want.pdbs},
		{"Service", len(set.Services), want.services},
		{"HorizontalPodAutoscaler", len(set.HPAs), want.hpas},
	} {
		if c.want > 0 && c.got != c.want {
			t.Errorf("%d %s, want %d", c.got, c.kind, c.want)
		}
	}
	if want.podMonitors > 0 && len(set.Rules) == 0 {
		t.Errorf("no PrometheusRule with the alerts")
	}
}

// validateBuild runs every check on the output of a kustomization users
// apply, and runs its gpuguard command lines.
func validateBuild(t *testing.T, rel string, set Set) {
	want := expect[rel]
	r, errs := CheckSet(set, exported, policyCheck)
	report(t, "checks", errs)
	if want.canary && r.CanaryShare == 0 {
		t.Errorf("no canary: want Deployments of both tracks")
	} else if r.CanaryShare > 0 {
		t.Logf("canary: %.0f%% of the replicas enforce", 100*r.CanaryShare)
	}
	if want.records && len(r.Records) == 0 {
		t.Errorf("no recording rules")
	}
	for _, g := range r.Guarded {
		checkDelivery(t, g)
		live := runLive(t, g, set)
		// The HPA's series are served, not only known to the registry.
		for _, s := range r.HPASeries {
			if !strings.Contains(live, "\n"+s+"{") {
				t.Errorf("the HPA scales on %s, which %s did not serve when run", s, g)
			}
		}
	}
	promtool(t, set)
}

func report(t *testing.T, what string, errs []error) {
	t.Helper()
	for _, err := range errs {
		t.Errorf("%s: %v", what, err)
	}
}

// policyCheck runs `gpuguard policy check` on a policy's text and
// returns what it resolves; a policy it refuses is an error.
func policyCheck(text string) (PolicySummary, error) {
	dir, err := os.MkdirTemp("", "ggv-policy")
	if err != nil {
		return PolicySummary{}, err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "policy.toml")
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		return PolicySummary{}, err
	}
	out, err := exec.Command(gpuguard, "policy", "check", file).CombinedOutput()
	if err != nil {
		return PolicySummary{}, fmt.Errorf("gpuguard policy check: %v\n%s", err, out)
	}
	return ParsePolicySummary(string(out))
}

// checkDelivery ties the gpuguard path in the Deployment to the image
// recipes: the init container copies the path the gpuguard image keeps the
// binary at, and a binary built into the server's image is where
// vllm.Dockerfile copies it.
func checkDelivery(t *testing.T, g Guarded) {
	t.Helper()
	image := dockerfileCopy(t, "Dockerfile")
	for _, ic := range g.Deployment.Spec.Template.Spec.InitContainers {
		argv := Argv(ic)
		if len(argv) == 3 && argv[0] == "cp" && argv[2] == g.Args.Binary && argv[1] != image {
			t.Errorf("%s: init container %s copies %s; the gpuguard image has it at %s", g, ic.Name, argv[1], image)
		}
	}
	if len(g.Deployment.Spec.Template.Spec.InitContainers) == 0 {
		if baked := dockerfileCopy(t, "vllm.Dockerfile"); g.Args.Binary != baked {
			t.Errorf("%s: runs %s with no init container; vllm.Dockerfile puts gpuguard at %s", g, g.Args.Binary, baked)
		}
	}
}

func dockerfileCopy(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "container", name))
	if err != nil {
		t.Fatal(err)
	}
	dest, err := FinalCopy(ParseDockerfile(string(b)))
	if err != nil {
		t.Fatalf("deploy/container/%s: %v", name, err)
	}
	return dest
}

// promtool runs `promtool check rules` on every PrometheusRule, as a
// subtest that skips, saying so, where promtool is not installed (.ci/run
// installs it; apt-get install prometheus).
func promtool(t *testing.T, set Set) {
	if len(set.Rules) == 0 {
		return
	}
	t.Run("promtool", func(t *testing.T) {
		pt, err := exec.LookPath("promtool")
		if err != nil {
			t.Skip("promtool not installed (apt-get install prometheus): rule syntax checked by the PromQL parser only")
		}
		for _, pr := range set.Rules {
			b, err := RuleFile(pr)
			if err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(t.TempDir(), pr.Name+".yml")
			if err := os.WriteFile(file, b, 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(pt, "check", "rules", file).CombinedOutput()
			if err != nil {
				t.Errorf("promtool check rules (PrometheusRule %s): %v\n%s", pr.Name, err, out)
			}
		}
	})
}
