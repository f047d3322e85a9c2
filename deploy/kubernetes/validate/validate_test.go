// Package validate checks the Kubernetes manifests of deploy/kubernetes
// against the Kubernetes API's own types: each document is decoded
// strictly (an unknown or misspelled field, a wrong type fails) into the
// object its kind names, and the points the deployment depends on are
// checked: probes on the instance's endpoints, a grace period longer than
// the stop timeout, one instance name per pod, the job file mounted.
//
// It is a module of its own so the Kubernetes packages stay out of
// onceflow's: ./scripts/test runs it (go test ./... here).
package validate

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

func decodeStrict(t *testing.T, file string, doc []byte) any {
	t.Helper()
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &meta); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	var obj any
	switch meta.APIVersion + "/" + meta.Kind {
	case "apps/v1/StatefulSet":
		obj = &appsv1.StatefulSet{}
	case "v1/ConfigMap":
		obj = &corev1.ConfigMap{}
	case "v1/Service":
		obj = &corev1.Service{}
	case "policy/v1/PodDisruptionBudget":
		obj = &policyv1.PodDisruptionBudget{}
	default:
		t.Fatalf("%s: kind %s %s is not one this check knows", file, meta.APIVersion, meta.Kind)
	}
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return obj
}

func TestManifests(t *testing.T) {
	files, err := filepath.Glob("../*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests next to this check (%v)", err)
	}
	objs := map[string]any{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range bytes.Split(b, []byte("\n---\n")) {
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			o := decodeStrict(t, f, doc)
			switch x := o.(type) {
			case *appsv1.StatefulSet:
				objs["StatefulSet/"+x.Name] = x
			case *corev1.ConfigMap:
				objs["ConfigMap/"+x.Name] = x
			case *corev1.Service:
				objs["Service/"+x.Name] = x
			case *policyv1.PodDisruptionBudget:
				objs["PodDisruptionBudget/"+x.Name] = x
			}
		}
	}
	ss, ok := objs["StatefulSet/onceflow-orders"].(*appsv1.StatefulSet)
	if !ok {
		t.Fatal("no StatefulSet onceflow-orders")
	}
	pod := ss.Spec.Template
	if !equalLabels(ss.Spec.Selector.MatchLabels, pod.Labels) {
		t.Errorf("the StatefulSet's selector %v does not select its pods %v", ss.Spec.Selector.MatchLabels, pod.Labels)
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("%d containers, want the onceflow one", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	args := strings.Join(c.Args, " ")
	if !strings.Contains(args, "--instance $(POD_NAME)") {
		t.Errorf("args %q: every pod needs its own instance name (--instance $(POD_NAME))", args)
	}
	stop := time.Minute
	if i := slices.Index(c.Args, "--stop-timeout"); i >= 0 && i+1 < len(c.Args) {
		if stop, err = time.ParseDuration(c.Args[i+1]); err != nil {
			t.Fatal(err)
		}
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= stop {
		t.Errorf("terminationGracePeriodSeconds %v must exceed --stop-timeout %v, or the final checkpoints are cut off", g, stop)
	}
	for name, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		want := map[string]string{"readiness": "/readyz", "liveness": "/healthz"}[name]
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != want || p.HTTPGet.Port.String() != "http" {
			t.Errorf("%s probe %+v: want GET %s on the port named http", name, p, want)
		}
	}
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "http" && p.ContainerPort == 8081 }) {
		t.Errorf("ports %+v: want http on 8081 (the job file's http.listen)", c.Ports)
	}
	mounted := false
	for _, v := range pod.Spec.Volumes {
		if v.ConfigMap != nil {
			if _, ok := objs["ConfigMap/"+v.ConfigMap.Name]; !ok {
				t.Errorf("volume %s mounts ConfigMap %s, which the manifests do not define", v.Name, v.ConfigMap.Name)
			}
			mounted = true
		}
	}
	if !mounted || !strings.HasSuffix(args, "/etc/onceflow/job.yaml") {
		t.Errorf("the job file must be mounted from the ConfigMap and be run (args %q)", args)
	}
	cm := objs["ConfigMap/onceflow-orders"].(*corev1.ConfigMap)
	if !strings.Contains(cm.Data["job.yaml"], "listen: 0.0.0.0:8081") {
		t.Error("the job file must listen on 0.0.0.0:8081 for the probes")
	}
	svc, ok := objs["Service/onceflow-orders"].(*corev1.Service)
	if !ok || svc.Spec.ClusterIP != "None" || ss.Spec.ServiceName != svc.Name || !equalLabels(svc.Spec.Selector, pod.Labels) {
		t.Error("the StatefulSet needs its headless Service selecting its pods")
	}
	pdb, ok := objs["PodDisruptionBudget/onceflow-orders"].(*policyv1.PodDisruptionBudget)
	if !ok || !equalLabels(pdb.Spec.Selector.MatchLabels, pod.Labels) {
		t.Error("the PodDisruptionBudget must select the instances")
	}
}

func equalLabels(a, b map[string]string) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return len(a) > 0
}
