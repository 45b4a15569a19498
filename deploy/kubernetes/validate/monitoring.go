package validate

import (
	"fmt"
	"slices"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// gpuguardJob is the job label deploy/prometheus/alerts.yml expects on
// gpuguard's targets (GPUGuardDown: up{job="gpuguard"}).
const gpuguardJob = "gpuguard"

func hasPort(d *appsv1.Deployment, p intstr.IntOrString) bool {
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, cp := range c.Ports {
			if p.Type == intstr.String && cp.Name == p.StrVal || p.Type == intstr.Int && cp.ContainerPort == p.IntVal {
				return true
			}
		}
	}
	return false
}

// missingPort says, for each of ds without the container port p, that
// what (the object and the port it names) is no container port of it.
func missingPort(ds []*appsv1.Deployment, p intstr.IntOrString, what string) []error {
	var errs []error
	for _, d := range ds {
		if !hasPort(d, p) {
			errs = append(errs, fmt.Errorf("%s is no container port of Deployment %s", what, d.Name))
		}
	}
	return errs
}

func selectedBy(s Set, kind, name string, ls *metav1.LabelSelector) ([]*appsv1.Deployment, error) {
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return nil, fmt.Errorf("%s %s: selector: %w", kind, name, err)
	}
	if sel.Empty() {
		return nil, fmt.Errorf("%s %s: empty selector", kind, name)
	}
	ds := s.Selected(sel)
	if len(ds) == 0 {
		return nil, fmt.Errorf("%s %s: selector %s selects no Deployment's pods", kind, name, sel)
	}
	return ds, nil
}

// CheckServing checks the Services, PodDisruptionBudgets, PodMonitors and
// NetworkPolicies against the Deployments: each selects some pods, the
// ports they name exist, and every gpuguard metrics port is scraped with job="gpuguard".
func CheckServing(s Set, guarded []Guarded, pols map[string]PolicySummary) []error {
	var errs []error
	for _, svc := range s.Services {
		ds, err := selectedBy(s, "Service", svc.Name, &metav1.LabelSelector{MatchLabels: svc.Spec.Selector})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, p := range svc.Spec.Ports {
			errs = append(errs, missingPort(ds, p.TargetPort, fmt.Sprintf("Service %s: targetPort %s", svc.Name, p.TargetPort.String()))...)
		}
	}
	for _, pdb := range s.PDBs {
		if _, err := selectedBy(s, "PodDisruptionBudget", pdb.Name, pdb.Spec.Selector); err != nil {
			errs = append(errs, err)
		}
	}
	for _, pm := range s.PodMonitors {
		ds, err := selectedBy(s, "PodMonitor", pm.Name, &pm.Spec.Selector)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, ep := range pm.Spec.PodMetricsEndpoints {
			if ep.Port == nil {
				errs = append(errs, fmt.Errorf("PodMonitor %s: an endpoint without a port name", pm.Name))
				continue
			}
			errs = append(errs, missingPort(ds, intstr.FromString(*ep.Port), fmt.Sprintf("PodMonitor %s: port %q", pm.Name, *ep.Port))...)
		}
	}
	for _, np := range s.NetPols {
		ds, err := selectedBy(s, "NetworkPolicy", np.Name, &np.Spec.PodSelector)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, rule := range np.Spec.Ingress {
			for _, p := range rule.Ports {
				if p.Port != nil {
					errs = append(errs, missingPort(ds, *p.Port, fmt.Sprintf("NetworkPolicy %s: port %s", np.Name, p.Port.String()))...)
				}
			}
		}
	}
	for _, g := range guarded {
		port, err := metricsPort(MetricsAddr(g, pols[g.Deployment.Name]))
		if err != nil {
			continue // CheckWorkload says why
		}
		if !scraped(s, g, containerPortName(g.Container, port)) {
			errs = append(errs, fmt.Errorf("%s: no PodMonitor scrapes its metrics port %d with job=%q", g, port, gpuguardJob))
		}
	}
	return errs
}

// scraped reports whether a PodMonitor selects g's pods and scrapes port
// with its job label set to gpuguardJob.
func scraped(s Set, g Guarded, port string) bool {
	for _, pm := range s.PodMonitors {
		sel, err := metav1.LabelSelectorAsSelector(&pm.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(g.Deployment.Spec.Template.Labels)) {
			continue
		}
		for _, ep := range pm.Spec.PodMetricsEndpoints {
			if ep.Port != nil && *ep.Port == port && setsJob(ep.RelabelConfigs, gpuguardJob) {
				return true
			}
		}
	}
	return false
}

func setsJob(rcs []monitoringv1.RelabelConfig, job string) bool {
	return slices.ContainsFunc(rcs, func(rc monitoringv1.RelabelConfig) bool {
		action := rc.Action
		return rc.TargetLabel == "job" && len(rc.SourceLabels) == 0 &&
			(action == "" || action == "replace" || action == "Replace") &&
			rc.Replacement != nil && *rc.Replacement == job
	})
}

// ScrapeLabels are the labels a target of these PodMonitors carries:
// Prometheus Operator's (job, instance, namespace, pod, container,
// endpoint) and the pod labels named in podTargetLabels, each with the
// values the pod templates give it.
func ScrapeLabels(s Set) map[string][]string {
	out := map[string][]string{}
	for _, l := range []string{"job", "instance", "namespace", "pod", "container", "endpoint"} {
		out[l] = nil // any value
	}
	for _, pm := range s.PodMonitors {
		for _, l := range pm.Spec.PodTargetLabels {
			if _, ok := out[l]; !ok {
				out[l] = []string{}
			}
			for _, d := range s.Deployments {
				if v, ok := d.Spec.Template.Labels[l]; ok && !slices.Contains(out[l], v) {
					out[l] = append(out[l], v)
				}
			}
		}
	}
	return out
}
