package validate

import (
	"errors"
	"fmt"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
)

// Decoder decodes manifests into their typed API structs, strictly: a
// field the type does not have, a field given twice, or a kind the scheme
// does not know is an error, as the API server's strict field validation
// (kubectl apply --validate=strict) would make it.
type Decoder struct {
	ser *json.Serializer
}

// NewDecoder knows the kinds the manifests may use: core/v1, apps/v1,
// policy/v1, autoscaling/v2, networking/v1 and prometheus-operator's monitoring.coreos.com/v1.
func NewDecoder() (*Decoder, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, policyv1.AddToScheme,
		autoscalingv2.AddToScheme, networkingv1.AddToScheme, monitoringv1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	ser := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme,
		json.SerializerOptions{Yaml: true, Strict: true})
	return &Decoder{ser: ser}, nil
}

// Decode returns the typed object in b (JSON or YAML).
func (d *Decoder) Decode(b []byte) (runtime.Object, error) {
	obj, gvk, err := d.ser.Decode(b, nil, nil)
	if err != nil {
		if gvk != nil && !runtime.IsStrictDecodingError(err) {
			return nil, fmt.Errorf("%s: %w", gvk, err)
		}
		if gvk != nil {
			return nil, fmt.Errorf("%s %s: %w", gvk.Kind, objectName(obj), err)
		}
		return nil, err
	}
	if obj == nil {
		return nil, errors.New("empty object")
	}
	return obj, nil
}

func objectName(obj runtime.Object) string {
	type named interface{ GetName() string }
	if n, ok := obj.(named); ok {
		return n.GetName()
	}
	return "(unnamed)"
}
