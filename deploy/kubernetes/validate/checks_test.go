package validate

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// shipped builds and decodes one of the shipped kustomizations (a
// component on top of base/), afresh for each caller to change.
func shipped(t *testing.T, rel string) Set {
	t.Helper()
	k := Kustomization{Dir: filepath.Join(kubeRoot, rel), Rel: rel, Component: strings.HasPrefix(rel, "components/")}
	objs, err := k.Build(kubeRoot, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dec, err := NewDecoder()
	if err != nil {
		t.Fatal(err)
	}
	s, errs := dec.DecodeAll(objs)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return s
}

// basePolicy is what `gpuguard policy check` resolves base/'s policy to
// (TestKustomizations checks the real thing); fixed here so that each case
// below runs no binary.
func basePolicy(string) (PolicySummary, error) {
	return PolicySummary{StopTimeout: 60 * time.Second}, nil
}

func vllm(s Set) *corev1.Container { return &s.Deployments[0].Spec.Template.Spec.Containers[0] }

func setArg(c *corev1.Container, flag, value string) {
	for i, a := range c.Args {
		if a == flag {
			c.Args[i+1] = value
		}
	}
}

// TestChecksCatchMistakes breaks the shipped manifests one way at a time;
// each break must be reported, naming what is wrong.
func TestChecksCatchMistakes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rel    string
		mutate func(s *Set)
		want   string
	}{
		{"grace equal to stop_timeout", "base", func(s *Set) {
			s.Deployments[0].Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](60)
		}, "terminationGracePeriodSeconds 1m0s is not above the policy's restart.stop_timeout 1m0s"},
		{"grace left to the default", "base", func(s *Set) {
			s.Deployments[0].Spec.Template.Spec.TerminationGracePeriodSeconds = nil
		}, "terminationGracePeriodSeconds 30s"},
		{"metrics on loopback", "base", func(s *Set) { setArg(vllm(*s), "--metrics-addr", "127.0.0.1:9464") }, "is loopback"},
		{"metrics on localhost", "base", func(s *Set) { setArg(vllm(*s), "--metrics-addr", "localhost:9464") }, "is loopback"},
		{"metrics off a container port", "base", func(s *Set) { setArg(vllm(*s), "--metrics-addr", ":9999") }, "metrics port 9999 is not a named container port"},
		{"metrics disabled", "base", func(s *Set) {
			c := vllm(*s)
			c.Args = slices.DeleteFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--metrics-addr") || strings.Contains(a, ":9464") })
		}, "metrics are disabled"},
		{"no GPU", "base", func(s *Set) { delete(vllm(*s).Resources.Limits, "nvidia.com/gpu") }, "no GPU in resources.limits"},
		{"GPU request differs from its limit", "base", func(s *Set) {
			vllm(*s).Resources.Requests["nvidia.com/gpu"] = resource.MustParse("2")
		}, "request of nvidia.com/gpu must equal its limit"},
		{"policy not from a volume", "base", func(s *Set) { setArg(vllm(*s), "--policy", "/policy.toml") }, "is under no volume mount"},
		{"policy key missing", "base", func(s *Set) { setArg(vllm(*s), "--policy", "/etc/gpuguard/llama.toml") }, `has no key "llama.toml"`},
		{"unknown run flag", "base", func(s *Set) { vllm(*s).Args = append(vllm(*s).Args, "--observ") }, "gpuguard run has no flag --observ"},
		{"init container copies elsewhere", "base", func(s *Set) {
			s.Deployments[0].Spec.Template.Spec.InitContainers[0].Command[2] = "/opt/gpuguard/gpuguard"
		}, "no init container writes it there"},
		{"state dir in the container's filesystem", "base", func(s *Set) {
			c := vllm(*s)
			for i := range c.Env {
				if c.Env[i].Name == "GPUGUARD_STATE_DIR" {
					c.Env[i].Value = "/state"
				}
			}
		}, "GPUGUARD_STATE_DIR=/state is on the container's own filesystem"},
		{"a volume with two sources", "base", func(s *Set) {
			v := &s.Deployments[0].Spec.Template.Spec.Volumes[0]
			v.HostPath = &corev1.HostPathVolumeSource{Path: "/run/gpuguard"}
		}, "has 2 sources"},
		{"selector misses the pods", "base", func(s *Set) {
			s.Deployments[0].Spec.Selector.MatchLabels["app.kubernetes.io/name"] = "tgi"
		}, "spec.selector does not select the pod template's labels"},
		{"PodMonitor on a missing port", "base", func(s *Set) {
			s.PodMonitors[0].Spec.PodMetricsEndpoints[0].Port = ptr.To("prometheus")
		}, `port "prometheus" is no container port`},
		{"PodMonitor leaves job alone", "base", func(s *Set) {
			s.PodMonitors[0].Spec.PodMetricsEndpoints[0].RelabelConfigs = nil
		}, `no PodMonitor scrapes its metrics port 9464 with job="gpuguard"`},
		{"Service to a missing port", "base", func(s *Set) {
			s.Services[0].Spec.Ports[0].TargetPort = intstr.FromString("web")
		}, "targetPort web is no container port"},
		{"PDB selects nothing", "base", func(s *Set) {
			s.PDBs[0].Spec.Selector.MatchLabels = map[string]string{"app": "vllm"}
		}, "PodDisruptionBudget vllm: selector app=vllm selects no Deployment's pods"},
		{"NetworkPolicy on a missing port", "components/metrics-network-policy", func(s *Set) {
			p := intstr.FromString("prometheus")
			s.NetPols[0].Spec.Ingress[1].Ports[0].Port = &p
		}, `NetworkPolicy vllm-metrics: port prometheus is no container port`},
		{"canary enforcing 25%", "overlays/canary", func(s *Set) {
			s.Deployment("vllm-observe").Spec.Replicas = ptr.To[int32](3)
		}, "1 of 4 replicas enforce (25%); want 5-20%"},
		{"canary enforcing 3%", "overlays/canary", func(s *Set) {
			s.Deployment("vllm-observe").Spec.Replicas = ptr.To[int32](30)
		}, "1 of 31 replicas enforce (3%); want 5-20%"},
		{"enforce track observes", "overlays/canary", func(s *Set) {
			c := &s.Deployment("vllm-enforce").Spec.Template.Spec.Containers[0]
			c.Args = append(c.Args, "--observe")
		}, "track=enforce, but --observe is true"},
		{"observe track enforces", "overlays/canary", func(s *Set) {
			c := &s.Deployment("vllm-observe").Spec.Template.Spec.Containers[0]
			c.Args = slices.DeleteFunc(c.Args, func(a string) bool { return a == "--observe" })
		}, "track=observe, but --observe is false"},
		{"selectors overlap", "overlays/canary", func(s *Set) {
			delete(s.Deployment("vllm-observe").Spec.Selector.MatchLabels, "track")
		}, "its selector also selects the pods of Deployment vllm-enforce"},
		{"canary without track label", "overlays/canary", func(s *Set) {
			d := s.Deployment("vllm-enforce")
			delete(d.Spec.Template.Labels, "track")
			delete(d.Spec.Selector.MatchLabels, "track")
		}, "a canary Deployment needs the label track=enforce or track=observe"},
		{"recording rule on a misspelt series", "overlays/canary", func(s *Set) {
			s.Rules[1].Spec.Groups[0].Rules[0].Expr = intstr.FromString("count by (namespace, track) (gpuguard_child_upp)")
		}, "unknown series gpuguard_child_upp"},
		{"recording rule on a wrong reason", "overlays/canary", func(s *Set) {
			s.Rules[1].Spec.Groups[0].Rules[1].Expr = intstr.FromString(`sum(gpuguard_restarts_total{reason="oom_kill"})`)
		}, `gpuguard_restarts_total{reason="oom_kill"}: no such value`},
		{"recording rule on a track that does not exist", "overlays/canary", func(s *Set) {
			s.Rules[1].Spec.Groups[0].Rules[1].Expr = intstr.FromString(`sum(gpuguard_restarts_total{track="stable"})`)
		}, `gpuguard_restarts_total{track="stable"}: no such value`},
		{"grouping by a label nothing has", "overlays/canary", func(s *Set) {
			s.Rules[1].Spec.Groups[0].Rules[0].Expr = intstr.FromString("count by (namespace, trak) (gpuguard_child_up)")
		}, `count names label "trak"`},
		{"record name against convention", "overlays/canary", func(s *Set) {
			s.Rules[1].Spec.Groups[0].Rules[0].Record = "gpuguard_pods"
		}, "record names read level:metric:operations"},
		{"rule with alert and record", "overlays/canary", func(s *Set) {
			s.Rules[1].Spec.Groups[0].Rules[0].Alert = "X"
		}, "a rule needs exactly one of alert and record"},
		{"PromQL syntax", "overlays/canary", func(s *Set) {
			s.Rules[1].Spec.Groups[0].Rules[0].Expr = intstr.FromString("count by (namespace (gpuguard_child_up)")
		}, "unexpected"},
		{"HPA on a metric the adapter does not serve", "overlays/hpa", func(s *Set) {
			s.HPAs[0].Spec.Metrics[0].Pods.Metric.Name = "gpuguard_watermark"
		}, "metric gpuguard_watermark: no prometheus-adapter rule here serves it"},
		{"HPA on a Utilization target", "overlays/hpa", func(s *Set) {
			s.HPAs[0].Spec.Metrics[0].Pods.Target = autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)}
		}, "takes an AverageValue target"},
		{"HPA beside a replicas field", "overlays/hpa", func(s *Set) {
			s.Deployments[0].Spec.Replicas = ptr.To[int32](1)
		}, "Deployment vllm sets replicas"},
		{"HPA on another Deployment", "overlays/hpa", func(s *Set) {
			s.HPAs[0].Spec.ScaleTargetRef.Name = "tgi"
		}, "scaleTargetRef apps/v1 Deployment/tgi is not a Deployment of this build"},
		{"adapter rule on a misspelt series", "overlays/hpa", func(s *Set) {
			cm := s.ConfigMap("gpuguard-adapter-config")
			cm.Data[AdapterConfigKey] = strings.ReplaceAll(cm.Data[AdapterConfigKey], "gpuguard_profile_level", "gpuguard_profile_levle")
		}, "unknown series gpuguard_profile_levle"},
		{"adapter config with a misspelt field", "overlays/hpa", func(s *Set) {
			cm := s.ConfigMap("gpuguard-adapter-config")
			cm.Data[AdapterConfigKey] = strings.ReplaceAll(cm.Data[AdapterConfigKey], "metricsQuery", "metricQuery")
		}, `unknown field "metricQuery"`},
		{"adapter override on an unscraped label", "overlays/hpa", func(s *Set) {
			cm := s.ConfigMap("gpuguard-adapter-config")
			cm.Data[AdapterConfigKey] = strings.ReplaceAll(cm.Data[AdapterConfigKey], "pod:\n", "kubernetes_pod_name:\n")
		}, `label "kubernetes_pod_name" is not on scraped series`},
		{"adapter template error", "overlays/hpa", func(s *Set) {
			cm := s.ConfigMap("gpuguard-adapter-config")
			cm.Data[AdapterConfigKey] = strings.ReplaceAll(cm.Data[AdapterConfigKey], "<<.Series>>", "<<.Serie>>")
		}, "can't evaluate field Serie"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := shipped(t, tc.rel)
			if _, errs := CheckSet(s, exported, basePolicy); len(errs) > 0 {
				t.Fatalf("the shipped %s fails already: %v", tc.rel, errs)
			}
			tc.mutate(&s)
			_, errs := CheckSet(s, exported, basePolicy)
			for _, err := range errs {
				if strings.Contains(err.Error(), tc.want) {
					return
				}
			}
			t.Errorf("want an error containing %q, got %v", tc.want, errs)
		})
	}
}

// TestMIGResource: a MIG slice is a GPU request too.
func TestMIGResource(t *testing.T) {
	s := shipped(t, "base")
	l := vllm(s).Resources.Limits
	delete(l, "nvidia.com/gpu")
	l["nvidia.com/mig-3g.40gb"] = resource.MustParse("1")
	if _, errs := CheckSet(s, exported, basePolicy); len(errs) > 0 {
		t.Error(errs)
	}
}
