package validate

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Track names and the share of enforcing replicas the contract allows.
const (
	TrackLabel   = "track"
	TrackEnforce = "enforce"
	TrackObserve = "observe"
	MinEnforce   = 0.05
	MaxEnforce   = 0.20
)

// CheckCanary checks a canary: gpuguard Deployments told apart by the
// track label, where track=observe runs `--observe` and track=enforce does
// not, whose selectors never claim each other's pods, and where the
// enforcing replicas are 5-20% of all. A set with one gpuguard Deployment
// and no track label is no canary, and passes. It returns the enforcing
// share.
func CheckCanary(guarded []Guarded) (float64, []error) {
	tracked := false
	for _, g := range guarded {
		_, ok := g.Deployment.Spec.Template.Labels[TrackLabel]
		tracked = tracked || ok
	}
	if len(guarded) < 2 && !tracked {
		return 0, nil
	}
	var errs []error
	var enforce, total int32
	for _, g := range guarded {
		n := int32(1)
		if g.Deployment.Spec.Replicas != nil {
			n = *g.Deployment.Spec.Replicas
		}
		total += n
		switch track := g.Deployment.Spec.Template.Labels[TrackLabel]; {
		case track == TrackEnforce && !g.Args.Observe:
			enforce += n
		case track == TrackObserve && g.Args.Observe:
		case track == TrackEnforce || track == TrackObserve:
			errs = append(errs, fmt.Errorf("%s: track=%s, but --observe is %v", g, track, g.Args.Observe))
		default:
			errs = append(errs, fmt.Errorf("%s: a canary Deployment needs the label %s=%s or %s=%s on its pods", g, TrackLabel, TrackEnforce, TrackLabel, TrackObserve))
		}
		sel, err := metav1.LabelSelectorAsSelector(g.Deployment.Spec.Selector)
		for _, o := range guarded {
			if o.Deployment != g.Deployment && err == nil && sel.Matches(labels.Set(o.Deployment.Spec.Template.Labels)) {
				errs = append(errs, fmt.Errorf("%s: its selector also selects the pods of Deployment %s", g, o.Deployment.Name))
			}
		}
	}
	if total == 0 {
		return 0, append(errs, fmt.Errorf("canary: no replicas"))
	}
	share := float64(enforce) / float64(total)
	if share < MinEnforce || share > MaxEnforce {
		errs = append(errs, fmt.Errorf("canary: %d of %d replicas enforce (%.0f%%); want %.0f-%.0f%%",
			enforce, total, 100*share, 100*MinEnforce, 100*MaxEnforce))
	}
	return share, errs
}
