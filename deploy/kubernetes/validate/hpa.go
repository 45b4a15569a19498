package validate

import (
	"fmt"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
)

// AdapterConfigKey is the key of prometheus-adapter's config file in its
// ConfigMap.
const AdapterConfigKey = "config.yaml"

// AdapterConfigs returns the prometheus-adapter configs in the set: the
// ConfigMaps with a config.yaml key.
func AdapterConfigs(s Set) (map[string]AdapterConfig, []error) {
	out := map[string]AdapterConfig{}
	var errs []error
	for _, cm := range s.ConfigMaps {
		text, ok := cm.Data[AdapterConfigKey]
		if !ok {
			continue
		}
		cfg, err := ParseAdapterConfig(text)
		if err != nil {
			errs = append(errs, fmt.Errorf("ConfigMap %s: %w", cm.Name, err))
			continue
		}
		out[cm.Name] = cfg
	}
	return out, errs
}

// CheckHPA checks that each HorizontalPodAutoscaler scales a Deployment of
// the set whose manifest leaves the replica count to it, and that it scales
// on at least one gpuguard series, every Pods metric being one the
// adapter's rules serve per pod. It returns the series those metrics come
// from.
func CheckHPA(s Set, served map[string]AdapterMetric) ([]string, []error) {
	var series []string
	var errs []error
	for _, h := range s.HPAs {
		fail := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("HorizontalPodAutoscaler %s: "+format, append([]any{h.Name}, args...)...))
		}
		ref := h.Spec.ScaleTargetRef
		d := s.Deployment(ref.Name)
		switch {
		case ref.Kind != "Deployment" || ref.APIVersion != "apps/v1" || d == nil:
			fail("scaleTargetRef %s %s/%s is not a Deployment of this build", ref.APIVersion, ref.Kind, ref.Name)
		case d.Spec.Replicas != nil:
			fail("Deployment %s sets replicas: every kubectl apply would reset what the HPA chose", d.Name)
		}
		if h.Spec.MinReplicas != nil && *h.Spec.MinReplicas > h.Spec.MaxReplicas {
			fail("minReplicas %d > maxReplicas %d", *h.Spec.MinReplicas, h.Spec.MaxReplicas)
		}
		ours := 0
		for _, m := range h.Spec.Metrics {
			switch m.Type {
			case autoscalingv2.PodsMetricSourceType:
				am, ok := served[m.Pods.Metric.Name]
				switch {
				case !ok:
					fail("metric %s: no prometheus-adapter rule here serves it", m.Pods.Metric.Name)
				case !am.PerPod:
					fail("metric %s: its adapter rule maps no label to pods", m.Pods.Metric.Name)
				case m.Pods.Target.Type != autoscalingv2.AverageValueMetricType || m.Pods.Target.AverageValue == nil:
					fail("metric %s: a Pods metric takes an AverageValue target", m.Pods.Metric.Name)
				default:
					ours++
					series = append(series, am.Series)
				}
			case autoscalingv2.ResourceMetricSourceType, autoscalingv2.ContainerResourceMetricSourceType:
			default:
				fail("metric type %s: not served by the adapter rules here", m.Type)
			}
		}
		if ours == 0 {
			fail("scales on no gpuguard series")
		}
	}
	return series, errs
}
