package validate

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"sigs.k8s.io/yaml"
)

func TestDecoderIsStrict(t *testing.T) {
	dec, err := NewDecoder()
	if err != nil {
		t.Fatal(err)
	}
	const dep = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\nspec:\n  selector: {matchLabels: {a: b}}\n  template:\n    metadata: {labels: {a: b}}\n    spec:\n      containers:\n        - name: c\n          image: i\n"
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"valid", dep, ""},
		{"unknown field", dep + "  replica: 1\n", `unknown field "spec.replica"`},
		{"unknown field in a container", dep + "          imagePullPolicyy: Always\n", `unknown field "spec.template.spec.containers[0].imagePullPolicyy"`},
		{"duplicate field", dep + "          image: j\n", `key "image" already set`},
		{"field in the wrong case", strings.Replace(dep, "selector:", "Selector:", 1), `unknown field "spec.Selector"`},
		{"unknown kind", strings.Replace(dep, "kind: Deployment", "kind: Deploymnt", 1), `no kind "Deploymnt" is registered`},
		{"unknown version", strings.Replace(dep, "apps/v1", "apps/v1beta3", 1), `no kind "Deployment" is registered for version "apps/v1beta3"`},
		{"PodMonitor field misspelt", "apiVersion: monitoring.coreos.com/v1\nkind: PodMonitor\nmetadata: {name: x}\nspec:\n  selector: {}\n  podMetricsEndpoints: []\n  podTargetLabel: [track]\n", `unknown field "spec.podTargetLabel"`},
		{"PrometheusRule rule field misspelt", "apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata: {name: x}\nspec:\n  groups:\n    - name: g\n      rules:\n        - record: a:b:c\n          exp: up\n", `unknown field "spec.groups[0].rules[0].exp"`},
		{"a kind no check knows", "apiVersion: v1\nkind: Secret\nmetadata: {name: x}\n", "no check here knows this kind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := dec.DecodeAll([][]byte{[]byte(tc.doc)})
			switch {
			case tc.want == "" && len(errs) > 0:
				t.Errorf("unexpected errors: %v", errs)
			case tc.want != "" && (len(errs) == 0 || !strings.Contains(errs[0].Error(), tc.want)):
				t.Errorf("errors %v, want one containing %q", errs, tc.want)
			}
		})
	}
}

func TestParseRunArgs(t *testing.T) {
	for _, tc := range []struct {
		name string
		argv []string
		want RunArgs
		err  string
	}{
		{"flags with values", []string{"/bin/gpuguard", "run", "--policy", "/p.toml", "--metrics-addr=0.0.0.0:9464"},
			RunArgs{Binary: "/bin/gpuguard", Flags: map[string]string{"policy": "/p.toml", "metrics-addr": "0.0.0.0:9464"}}, ""},
		{"observe and a command", []string{"gpuguard", "run", "--observe", "--", "vllm", "serve", "--observe"},
			RunArgs{Binary: "gpuguard", Flags: map[string]string{}, Observe: true, HasDashDash: true, Command: []string{"vllm", "serve", "--observe"}}, ""},
		{"observe=false", []string{"gpuguard", "run", "--observe=false"}, RunArgs{Binary: "gpuguard", Flags: map[string]string{}}, ""},
		{"not gpuguard", []string{"vllm", "serve"}, RunArgs{}, "does not run gpuguard"},
		{"not run", []string{"gpuguard", "status"}, RunArgs{}, "want `gpuguard run ...`"},
		{"unknown flag", []string{"gpuguard", "run", "--polcy", "x"}, RunArgs{}, "has no flag --polcy"},
		{"missing value", []string{"gpuguard", "run", "--policy"}, RunArgs{}, "--policy needs a value"},
		{"command without --", []string{"gpuguard", "run", "vllm"}, RunArgs{}, `unexpected argument "vllm"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseRunArgs(tc.argv)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestParsePolicySummary(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		want      PolicySummary
		err       string
	}{
		{"listening", "stop        signal=SIGTERM timeout=1m release_timeout=1m\nmetrics     0.0.0.0:9464\n", PolicySummary{StopTimeout: time.Minute, Listen: "0.0.0.0:9464"}, ""},
		{"disabled", "stop signal=SIGTERM timeout=30s\nmetrics disabled\n", PolicySummary{StopTimeout: 30 * time.Second}, ""},
		{"no stop line", "metrics disabled\n", PolicySummary{}, "no stop timeout or metrics line"},
		{"bad duration", "stop timeout=forever\nmetrics disabled\n", PolicySummary{}, `stop timeout "forever"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParsePolicySummary(tc.out)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// TestPrometheusRuleIsGenerated keeps base/common/prometheusrule.yaml the
// rendering of deploy/prometheus/alerts.yml, byte for byte, and checks that
// the rendering means the same rules.
func TestPrometheusRuleIsGenerated(t *testing.T) {
	alerts, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := RenderPrometheusRule(alerts)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(kubeRoot, "base", "common", "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("deploy/kubernetes/base/common/prometheusrule.yaml is not the rendering of deploy/prometheus/alerts.yml: run `go generate ./...` in deploy/kubernetes/validate")
	}
	var file struct {
		Groups []monitoringv1.RuleGroup `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(alerts, &file); err != nil {
		t.Fatal(err)
	}
	dec, err := NewDecoder()
	if err != nil {
		t.Fatal(err)
	}
	obj, err := dec.Decode(got)
	if err != nil {
		t.Fatal(err)
	}
	if pr := obj.(*monitoringv1.PrometheusRule); !reflect.DeepEqual(pr.Spec.Groups, file.Groups) {
		t.Errorf("the PrometheusRule's groups differ from alerts.yml's:\n%+v\n%+v", pr.Spec.Groups, file.Groups)
	}
}

func TestRenderPrometheusRuleRefuses(t *testing.T) {
	for _, tc := range []struct{ name, in, err string }{
		{"another top-level key", "groups: []\nextra: 1\n", `top-level key "extra"`},
		{"no groups line", "{\"groups\": []}\n", `no line starts with "groups:"`},
		{"not YAML", "groups: [\n", "reading the alert rules"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := RenderPrometheusRule([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("error %v, want %q", err, tc.err)
			}
		})
	}
}

func TestDockerfiles(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "container", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	ins := ParseDockerfile(string(b))
	if errs := CheckGPUGuardDockerfile(ins); len(errs) > 0 {
		t.Errorf("deploy/container/Dockerfile: %v", errs)
	}
	for _, tc := range []struct{ name, from, to, err string }{
		{"static build", "CGO_ENABLED=1", "CGO_ENABLED=0", "CGO_ENABLED=1"},
		{"musl image", "FROM debian:bookworm-slim", "FROM alpine:3", "no glibc"},
		{"empty image", "FROM debian:bookworm-slim", "FROM scratch", "no glibc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			broken := strings.Replace(string(b), tc.from, tc.to, 1)
			errs := CheckGPUGuardDockerfile(ParseDockerfile(broken))
			if len(errs) == 0 || !strings.Contains(errs[0].Error(), tc.err) {
				t.Errorf("errors %v, want %q", errs, tc.err)
			}
		})
	}
	got := ParseDockerfile("# c\nRUN a \\\n  b && \\\n c\nCOPY --from=x [\"/a\", \"/b\"]\n")
	want := []Instruction{{"RUN", []string{"a", "b", "&&", "c"}}, {"COPY", []string{"--from=x", "/a", "/b"}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseDockerfile: %+v, want %+v", got, want)
	}
}

// TestGlibcBound: the binary, built with cgo as the image builds it, runs
// on glibc 2.35 (Ubuntu 22.04, the base of the CUDA and vLLM images it is
// copied into). It is built here on Debian 12, like the image.
func TestGlibcBound(t *testing.T) {
	major, minor, err := RequiredGlibc(gpuguard)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("gpuguard needs GLIBC_%d.%d", major, minor)
	if major > 2 || major == 2 && minor > 35 {
		t.Errorf("gpuguard needs GLIBC_%d.%d; Ubuntu 22.04 has 2.35", major, minor)
	}
}

func TestEntry(t *testing.T) {
	for rel, want := range map[string]bool{
		"base": true, "overlays/canary": true, "overlays/hpa": true,
		"base/common": false, "overlays/canary/enforce": false,
	} {
		if got := (Kustomization{Rel: rel}).Entry(); got != want {
			t.Errorf("%s: Entry() = %v", rel, got)
		}
	}
	if !(Kustomization{Rel: "components/x", Component: true}).Entry() {
		t.Error("a component is an entry")
	}
}

func TestAdapterMetricName(t *testing.T) {
	for _, tc := range []struct{ matches, as, series, want, err string }{
		{"^gpuguard_(.*)$", "", "gpuguard_watermark_ratio", "watermark_ratio", ""},
		{"^gpuguard_watermark_ratio$", "", "gpuguard_watermark_ratio", "gpuguard_watermark_ratio", ""},
		{"^gpuguard_(.*)_total$", "${1}_per_second", "gpuguard_stepdowns_total", "stepdowns_per_second", ""},
		{"^x$", "", "gpuguard_child_up", "", "does not match"},
		{"^(a)(b)$", "", "ab", "", "name.as is required"},
	} {
		var r AdapterRule
		r.Name.Matches, r.Name.As = tc.matches, tc.as
		got, err := r.MetricName(tc.series)
		if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) || tc.err == "" && (err != nil || got != tc.want) {
			t.Errorf("%s as %q on %s: %q, %v; want %q, %q", tc.matches, tc.as, tc.series, got, err, tc.want, tc.err)
		}
	}
}

// TestRootModuleFreeOfKubernetes: gpuguard's own go.mod requires no
// Kubernetes module; they belong here.
func TestRootModuleFreeOfKubernetes(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require ")); len(f) > 0 &&
			(strings.HasPrefix(f[0], "k8s.io/") || strings.HasPrefix(f[0], "sigs.k8s.io/") || strings.Contains(f[0], "prometheus-operator")) {
			t.Errorf("go.mod:%d: %s: Kubernetes modules belong to deploy/kubernetes/validate", i+1, f[0])
		}
	}
}

// TestCanaryRulesCompute runs promtool's rule unit test
// (testdata/canary_rules_test.yml) on the canary's recording rules: they
// compute per pod and per track what docs/kubernetes.md says they do.
func TestCanaryRulesCompute(t *testing.T) {
	pt, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (apt-get install prometheus): recording rules not evaluated")
	}
	dec, err := NewDecoder()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(kubeRoot, "overlays", "canary", "recording-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	obj, err := dec.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := RuleFile(obj.(*monitoringv1.PrometheusRule))
	if err != nil {
		t.Fatal(err)
	}
	test, err := os.ReadFile(filepath.Join("testdata", "canary_rules_test.yml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, data := range map[string][]byte{"canary.yml": rules, "canary_test.yml": test} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command(pt, "test", "rules", filepath.Join(dir, "canary_test.yml")).CombinedOutput(); err != nil {
		t.Errorf("promtool test rules: %v\n%s", err, out)
	}
}
