// Package check holds the deployment artefacts' checks, in a module of
// their own so Helm's and Kubernetes' dependencies never reach the sluice
// binary: the chart (lint, render, strict decoding, invariants) and the
// rules' and dashboard's metric names against a running stack.
package check

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	yamlutil "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

var (
	chartDir         = filepath.Join(repoRoot, "deploy/helm/sluice")
	productionValues = filepath.Join(chartDir, "ci/production-values.yaml")
)

// valueSets are the values the chart is checked with: its defaults, and
// the production example.
func valueSets(t *testing.T) map[string]map[string]any {
	t.Helper()
	prod, err := chartutil.ReadValuesFile(productionValues)
	if err != nil {
		t.Fatal(err)
	}
	mtls := map[string]any{"temporal": map[string]any{"tls": map[string]any{"enabled": true, "existingSecret": "sluice-temporal-tls"}}}
	return map[string]map[string]any{"default values": {}, "production example": prod, "temporal mTLS": mtls}
}

func TestChartPassesHelmLint(t *testing.T) {
	for name, vals := range valueSets(t) {
		t.Run(name, func(t *testing.T) {
			linter := lint.All(chartDir, vals, "sluice", false)
			for _, m := range linter.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("helm lint: %s", m)
				}
			}
		})
	}
}

// rendered is one object of a rendered chart: the template it came from
// and its typed value.
type rendered struct {
	template string
	kind     string
	name     string
	obj      any
}

// kinds are the Kubernetes API types the chart may render, by
// apiVersion/kind; an object of any other kind fails the check.
var kinds = map[string]func() any{
	"apps/v1/Deployment":                      func() any { return &appsv1.Deployment{} },
	"v1/Service":                              func() any { return &corev1.Service{} },
	"v1/ServiceAccount":                       func() any { return &corev1.ServiceAccount{} },
	"batch/v1/Job":                            func() any { return &batchv1.Job{} },
	"policy/v1/PodDisruptionBudget":           func() any { return &policyv1.PodDisruptionBudget{} },
	"autoscaling/v2/HorizontalPodAutoscaler":  func() any { return &autoscalingv2.HorizontalPodAutoscaler{} },
	"networking.k8s.io/v1/NetworkPolicy":      func() any { return &networkingv1.NetworkPolicy{} },
	"monitoring.coreos.com/v1/ServiceMonitor": func() any { return &monitoringv1.ServiceMonitor{} },
}

// render renders the chart with vals as `helm template` would, and decodes
// every object strictly into its API type: an unknown or misspelt field,
// or a value of the wrong type, fails.
func render(t *testing.T, c *chart.Chart, vals map[string]any) []rendered {
	t.Helper()
	opts := chartutil.ReleaseOptions{Name: "sluice", Namespace: "sluice", IsInstall: true}
	values, err := chartutil.ToRenderValues(c, vals, opts, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.Render(c, values)
	if err != nil {
		t.Fatalf("rendering: %v", err)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []rendered
	for _, name := range names {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		objs, err := decodeStrict(files[name])
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
		for i := range objs {
			objs[i].template = name
		}
		out = append(out, objs...)
	}
	return out
}

// decodeStrict decodes every document of a manifest into its API type.
func decodeStrict(manifest string) ([]rendered, error) {
	var out []rendered
	docs := yamlutil.NewYAMLReader(bufio.NewReader(strings.NewReader(manifest)))
	for {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &head); err != nil {
			return out, err
		}
		if head.APIVersion == "" && head.Kind == "" {
			continue // a document of comments only
		}
		newObj, ok := kinds[head.APIVersion+"/"+head.Kind]
		if !ok {
			return out, fmt.Errorf("%s %s: no known API type", head.APIVersion, head.Kind)
		}
		obj := newObj()
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			return out, fmt.Errorf("%s %s: %w", head.Kind, head.Metadata.Name, err)
		}
		out = append(out, rendered{kind: head.Kind, name: head.Metadata.Name, obj: obj})
	}
}

func TestStrictDecodingRefusesAMisspeltField(t *testing.T) {
	_, err := decodeStrict("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  replica: 2\n")
	if err == nil || !strings.Contains(err.Error(), "replica") {
		t.Fatalf("a Deployment with spec.replica decoded with %v, want the unknown field named", err)
	}
}

func TestChartRendersWorkloadsThatKeepTheInvariants(t *testing.T) {
	c, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	for name, vals := range valueSets(t) {
		t.Run(name, func(t *testing.T) {
			objs := render(t, c, vals)
			byName := map[string]rendered{}
			for _, o := range objs {
				byName[o.kind+"/"+o.name] = o
			}
			for _, role := range []string{"api", "dispatcher", "worker"} {
				o, ok := byName["Deployment/sluice-"+role]
				if !ok {
					t.Errorf("no %s Deployment rendered", role)
					continue
				}
				d := o.obj.(*appsv1.Deployment)
				checkPod(t, "Deployment "+d.Name, d.Spec.Template.Spec, role, true)
			}
			for _, role := range []string{"api", "dispatcher"} {
				d := byName["Deployment/sluice-"+role].obj.(*appsv1.Deployment)
				if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
					t.Errorf("Deployment %s runs %v replicas, want at least 2", d.Name, d.Spec.Replicas)
				}
				if _, ok := byName["PodDisruptionBudget/sluice-"+role]; !ok {
					t.Errorf("no PodDisruptionBudget for the %s", role)
				}
			}
			want := []string{"Service/sluice-api", "Service/sluice-admin"}
			if name == "production example" {
				// Its optional parts are on: they must render and decode too.
				want = append(want, "ServiceMonitor/sluice", "HorizontalPodAutoscaler/sluice-worker",
					"NetworkPolicy/sluice-api", "NetworkPolicy/sluice-dispatcher", "NetworkPolicy/sluice-worker")
			}
			for _, w := range want {
				if _, ok := byName[w]; !ok {
					t.Errorf("%s not rendered", w)
				}
			}
			t.Logf("%d objects rendered and decoded strictly", len(objs))
			o, ok := byName["Job/sluice-migrate"]
			if !ok {
				t.Fatal("no migration Job rendered")
			}
			job := o.obj.(*batchv1.Job)
			hooks := strings.Split(job.Annotations["helm.sh/hook"], ",")
			if !slices.Contains(hooks, "pre-install") || !slices.Contains(hooks, "pre-upgrade") {
				t.Errorf("migration Job hooks %q, want pre-install and pre-upgrade", hooks)
			}
			checkPod(t, "Job "+job.Name, job.Spec.Template.Spec, "migrate", false)
		})
	}
}

// secretVariables come from Secrets only, never from a plain value.
var secretVariables = []string{"DATABASE_URL", "SLUICE_ADMIN_TOKEN", "TEMPORAL_API_KEY"}

// checkPod checks a workload's pod: non-root, every container with a
// read-only root filesystem, no privilege escalation, every capability
// dropped, requests and limits, secrets from Secrets, the role as its
// argument and, for a long-running role, its probes on the admin port.
func checkPod(t *testing.T, what string, pod corev1.PodSpec, role string, probed bool) {
	t.Helper()
	if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
		t.Errorf("%s: pod security context %+v, want runAsNonRoot and a non-zero runAsUser", what, pod.SecurityContext)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%s: %d containers, want 1", what, len(pod.Containers))
	}
	c := pod.Containers[0]
	sc := c.SecurityContext
	switch {
	case sc == nil:
		t.Errorf("%s: container has no security context", what)
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Errorf("%s: root filesystem is writable", what)
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Errorf("%s: privilege escalation is allowed", what)
	case sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL"):
		t.Errorf("%s: capabilities %+v, want ALL dropped", what, sc.Capabilities)
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := c.Resources.Requests[r]; !ok {
			t.Errorf("%s: no %s request", what, r)
		}
		if _, ok := c.Resources.Limits[r]; !ok {
			t.Errorf("%s: no %s limit", what, r)
		}
	}
	if !slices.Equal(c.Args, []string{role}) {
		t.Errorf("%s: args %q, want [%s]", what, c.Args, role)
	}
	for _, e := range c.Env {
		if slices.Contains(secretVariables, e.Name) && (e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
			t.Errorf("%s: %s is not taken from a Secret", what, e.Name)
		}
		if e.Name == "TEMPORAL_TLS_KEY" && !mountsSecret(pod, c, e.Value) {
			t.Errorf("%s: TEMPORAL_TLS_KEY %s is not in a mounted Secret", what, e.Value)
		}
	}
	if !probed {
		return
	}
	adminPort := int32(0)
	for _, p := range c.Ports {
		if p.Name == "admin" {
			adminPort = p.ContainerPort
		}
	}
	if adminPort == 0 {
		t.Errorf("%s: no admin port", what)
	}
	for _, p := range []struct {
		name, path string
		probe      *corev1.Probe
	}{{"liveness", "/healthz", c.LivenessProbe}, {"readiness", "/readyz", c.ReadinessProbe}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s: no HTTP %s probe", what, p.name)
			continue
		}
		if g := p.probe.HTTPGet; g.Path != p.path || g.Port.String() != "admin" {
			t.Errorf("%s: %s probe on %s port %s, want %s on the admin port", what, p.name, g.Path, g.Port.String(), p.path)
		}
	}
}

// mountsSecret reports whether path lies in a read-only mount of a Secret
// volume of the pod.
func mountsSecret(pod corev1.PodSpec, c corev1.Container, path string) bool {
	for _, m := range c.VolumeMounts {
		if !m.ReadOnly || !strings.HasPrefix(path, m.MountPath+"/") {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name == m.Name && v.Secret != nil {
				return true
			}
		}
	}
	return false
}
