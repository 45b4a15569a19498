package validate

import (
	"fmt"
	"net"
	"path"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Guarded is a Deployment's container that runs gpuguard.
type Guarded struct {
	Deployment *appsv1.Deployment
	Container  corev1.Container
	Args       RunArgs
}

// Argv is a container's command and args together, as the kubelet runs them.
func Argv(c corev1.Container) []string {
	return append(append([]string{}, c.Command...), c.Args...)
}

// FindGuarded returns every container that runs gpuguard. Every Deployment
// here exists to run a model server under gpuguard, so one without such a
// container is an error, and so is a gpuguard command line gpuguard would
// refuse.
func FindGuarded(s Set) ([]Guarded, []error) {
	var out []Guarded
	var errs []error
	for _, d := range s.Deployments {
		found := false
		for _, c := range d.Spec.Template.Spec.Containers {
			if !IsGuarded(Argv(c)) {
				continue
			}
			found = true
			a, err := ParseRunArgs(Argv(c))
			if err != nil {
				errs = append(errs, fmt.Errorf("Deployment %s, container %s: %w", d.Name, c.Name, err))
				continue
			}
			out = append(out, Guarded{Deployment: d, Container: c, Args: a})
		}
		if !found {
			errs = append(errs, fmt.Errorf("Deployment %s: no container runs gpuguard (command[0] named gpuguard)", d.Name))
		}
	}
	return out, errs
}

func (g Guarded) String() string {
	return fmt.Sprintf("Deployment %s, container %s", g.Deployment.Name, g.Container.Name)
}

// mountFor returns the volume mount under which file lies, and the path of
// file inside that volume.
func mountFor(c corev1.Container, file string) (corev1.VolumeMount, string, bool) {
	var best corev1.VolumeMount
	var rel string
	found := false
	for _, m := range c.VolumeMounts {
		r, ok := strings.CutPrefix(file, strings.TrimSuffix(m.MountPath, "/")+"/")
		if ok && (!found || len(m.MountPath) > len(best.MountPath)) {
			best, rel, found = m, r, true
		}
	}
	return best, rel, found
}

// onVolume reports whether dir is a volume mount or lies under one.
func onVolume(c corev1.Container, dir string) bool {
	dir = path.Clean(dir)
	for _, m := range c.VolumeMounts {
		if mp := path.Clean(m.MountPath); dir == mp || strings.HasPrefix(dir, mp+"/") {
			return true
		}
	}
	return false
}

func podVolume(d *appsv1.Deployment, name string) (corev1.Volume, bool) {
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == name {
			return v, true
		}
	}
	return corev1.Volume{}, false
}

// PolicyFile follows --policy through the container's volume mounts to the
// ConfigMap key that holds it, as the kubelet would project it.
func PolicyFile(s Set, g Guarded) (string, error) {
	file, ok := g.Args.Flags["policy"]
	if !ok {
		return "", fmt.Errorf("%s: no --policy: the policy must come from the ConfigMap", g)
	}
	m, rel, ok := mountFor(g.Container, file)
	if !ok {
		return "", fmt.Errorf("%s: --policy %s is under no volume mount", g, file)
	}
	v, ok := podVolume(g.Deployment, m.Name)
	if !ok || v.ConfigMap == nil {
		return "", fmt.Errorf("%s: --policy %s: volume %q is not a ConfigMap volume", g, file, m.Name)
	}
	key := rel
	for _, it := range v.ConfigMap.Items {
		if it.Path == rel {
			key = it.Key
		}
	}
	cm := s.ConfigMap(v.ConfigMap.Name)
	if cm == nil {
		return "", fmt.Errorf("%s: --policy %s: ConfigMap %q is not in the build", g, file, v.ConfigMap.Name)
	}
	text, ok := cm.Data[key]
	if !ok {
		return "", fmt.Errorf("%s: --policy %s: ConfigMap %s has no key %q", g, file, cm.Name, key)
	}
	return text, nil
}

// MetricsAddr is where gpuguard serves /metrics: --metrics-addr, else the
// policy's [metrics] listen.
func MetricsAddr(g Guarded, p PolicySummary) string {
	if a, ok := g.Args.Flags["metrics-addr"]; ok {
		return a
	}
	return p.Listen
}

// CheckWorkload checks one gpuguard container against the settings its
// policy resolves to.
func CheckWorkload(g Guarded, p PolicySummary) []error {
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{g}, args...)...))
	}
	spec := g.Deployment.Spec.Template.Spec

	grace := 30 * time.Second // the API's default
	if spec.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second
	}
	if grace <= p.StopTimeout {
		fail("terminationGracePeriodSeconds %s is not above the policy's restart.stop_timeout %s: the kubelet would SIGKILL gpuguard before it has stopped the server", grace, p.StopTimeout)
	}

	if port, err := metricsPort(MetricsAddr(g, p)); err != nil {
		fail("%v", err)
	} else if name := containerPortName(g.Container, port); name == "" {
		fail("metrics port %d is not a named container port", port)
	}

	if !requestsGPU(g.Container.Resources) {
		fail("no GPU in resources.limits (nvidia.com/gpu or nvidia.com/mig-*)")
	}
	for r, q := range g.Container.Resources.Requests {
		if l, ok := g.Container.Resources.Limits[r]; isGPUResource(r) && (!ok || l.Cmp(q) != 0) {
			fail("request of %s must equal its limit", r)
		}
	}

	errs = append(errs, checkBinary(g)...)

	sel, err := metav1.LabelSelectorAsSelector(g.Deployment.Spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(g.Deployment.Spec.Template.Labels)) {
		fail("spec.selector does not select the pod template's labels")
	}

	for _, e := range g.Container.Env {
		if strings.HasPrefix(e.Name, "GPUGUARD_") && strings.HasSuffix(e.Name, "_DIR") {
			if !onVolume(g.Container, e.Value) {
				fail("%s=%s is on the container's own filesystem; mount a volume there", e.Name, e.Value)
			}
		}
	}
	return errs
}

// metricsPort checks that addr is reachable from outside the pod and
// returns its port.
func metricsPort(addr string) (int32, error) {
	if addr == "" {
		return 0, fmt.Errorf("metrics are disabled (no --metrics-addr, no [metrics] listen): Prometheus has nothing to scrape")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, fmt.Errorf("metrics address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
		return 0, fmt.Errorf("metrics address %q is loopback: Prometheus scrapes the pod's IP", addr)
	}
	n, err := strconv.ParseInt(port, 10, 32)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("metrics address %q: want a fixed port", addr)
	}
	return int32(n), nil
}

func containerPortName(c corev1.Container, port int32) string {
	for _, p := range c.Ports {
		if p.ContainerPort == port {
			return p.Name
		}
	}
	return ""
}

func isGPUResource(r corev1.ResourceName) bool {
	return r == "nvidia.com/gpu" || strings.HasPrefix(string(r), "nvidia.com/mig-")
}

func requestsGPU(rr corev1.ResourceRequirements) bool {
	for r, q := range rr.Limits {
		if isGPUResource(r) && q.Value() >= 1 {
			return true
		}
	}
	return false
}

// checkBinary checks how the binary gets into the container: under an
// emptyDir that an init container fills (way 1), or at an absolute path of
// the image itself (way 2, built in).
func checkBinary(g Guarded) []error {
	bin := g.Args.Binary
	if !path.IsAbs(bin) {
		return []error{fmt.Errorf("%s: gpuguard path %q is not absolute", g, bin)}
	}
	m, rel, ok := mountFor(g.Container, bin)
	if !ok {
		return nil // way 2: part of the image
	}
	v, _ := podVolume(g.Deployment, m.Name)
	if v.EmptyDir == nil {
		return []error{fmt.Errorf("%s: %s is on volume %q, which is not an emptyDir", g, bin, m.Name)}
	}
	for _, ic := range g.Deployment.Spec.Template.Spec.InitContainers {
		for _, im := range ic.VolumeMounts {
			if im.Name == m.Name && !im.ReadOnly && slices.Contains(Argv(ic), path.Join(im.MountPath, rel)) {
				return nil
			}
		}
	}
	return []error{fmt.Errorf("%s: %s is on emptyDir %q, but no init container writes it there", g, bin, m.Name)}
}

// CheckVolumes checks what the API server would refuse about volumes: a
// volume with no source or two (a patch that adds hostPath but leaves
// emptyDir does that), and mounts of volumes that do not exist.
func CheckVolumes(d *appsv1.Deployment) []error {
	var errs []error
	spec := d.Spec.Template.Spec
	for _, v := range spec.Volumes {
		if n := countSet(v.VolumeSource); n != 1 {
			errs = append(errs, fmt.Errorf("Deployment %s: volume %q has %d sources, want exactly one", d.Name, v.Name, n))
		}
	}
	for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
		for _, m := range c.VolumeMounts {
			if _, ok := podVolume(d, m.Name); !ok {
				errs = append(errs, fmt.Errorf("Deployment %s, container %s: mounts volume %q, which does not exist", d.Name, c.Name, m.Name))
			}
		}
	}
	return errs
}

// countSet counts the non-nil pointer fields of a struct (the sources of a
// VolumeSource).
func countSet(s any) int {
	v := reflect.ValueOf(s)
	n := 0
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			n++
		}
	}
	return n
}
