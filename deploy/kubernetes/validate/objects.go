package validate

import (
	"fmt"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Set is one kustomization's output, decoded, by kind.
type Set struct {
	Deployments []*appsv1.Deployment
	ConfigMaps  []*corev1.ConfigMap
	Services    []*corev1.Service
	PDBs        []*policyv1.PodDisruptionBudget
	PodMonitors []*monitoringv1.PodMonitor
	Rules       []*monitoringv1.PrometheusRule
	HPAs        []*autoscalingv2.HorizontalPodAutoscaler
	NetPols     []*networkingv1.NetworkPolicy
}

// DecodeAll decodes every object strictly. A kind that decodes but that no
// check here looks at is an error too: a new kind needs its checks.
func (d *Decoder) DecodeAll(objs [][]byte) (Set, []error) {
	var s Set
	var errs []error
	for _, b := range objs {
		obj, err := d.Decode(b)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		switch o := obj.(type) {
		case *appsv1.Deployment:
			s.Deployments = append(s.Deployments, o)
		case *corev1.ConfigMap:
			s.ConfigMaps = append(s.ConfigMaps, o)
		case *corev1.Service:
			s.Services = append(s.Services, o)
		case *policyv1.PodDisruptionBudget:
			s.PDBs = append(s.PDBs, o)
		case *monitoringv1.PodMonitor:
			s.PodMonitors = append(s.PodMonitors, o)
		case *monitoringv1.PrometheusRule:
			s.Rules = append(s.Rules, o)
		case *autoscalingv2.HorizontalPodAutoscaler:
			s.HPAs = append(s.HPAs, o)
		case *networkingv1.NetworkPolicy:
			s.NetPols = append(s.NetPols, o)
		default:
			errs = append(errs, fmt.Errorf("%s %s: no check here knows this kind; add its checks to package validate",
				obj.GetObjectKind().GroupVersionKind().Kind, objectName(obj)))
		}
	}
	return s, errs
}

// ConfigMap returns the ConfigMap called name, or nil.
func (s Set) ConfigMap(name string) *corev1.ConfigMap { return byName(s.ConfigMaps, name) }

// Deployment returns the Deployment called name, or nil.
func (s Set) Deployment(name string) *appsv1.Deployment { return byName(s.Deployments, name) }

func byName[T interface{ GetName() string }](objs []T, name string) T {
	for _, o := range objs {
		if o.GetName() == name {
			return o
		}
	}
	var none T
	return none
}

// Selected returns the Deployments whose pods sel selects.
func (s Set) Selected(sel labels.Selector) []*appsv1.Deployment {
	var out []*appsv1.Deployment
	for _, d := range s.Deployments {
		if !sel.Empty() && sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			out = append(out, d)
		}
	}
	return out
}
