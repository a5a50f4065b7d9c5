package deploy

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// overlays are the kustomizations users apply.
var overlays = []string{"base", "overlays/dev", "overlays/production"}

// render builds a kustomization with kustomize as a library, as
// `kubectl apply -k` does.
func render(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var objs []*unstructured.Unstructured
	for _, r := range rm.Resources() {
		js, err := r.MarshalJSON()
		u := &unstructured.Unstructured{}
		if err == nil {
			err = u.UnmarshalJSON(js)
		}
		if err != nil {
			t.Fatalf("%s: %s: %v", dir, r.CurId(), err)
		}
		objs = append(objs, u)
	}
	return objs
}

// readObjects parses a multi-document YAML file that is not part of a
// kustomization (the export Job).
func readObjects(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(string(data), "\n---\n") {
		js, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(js); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, u)
	}
	return objs
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// TestRender: every overlay renders; it holds the proxy, Redis and envd,
// renders no Secret (they are referenced by name only), points envd at the
// proxy Service, and sets the replicas and HPA bounds of its kind.
func TestRender(t *testing.T) {
	want := map[string][3]int64{ // proxy replicas, HPA min, HPA max
		"base": {2, 2, 8}, "overlays/dev": {1, 1, 1}, "overlays/production": {3, 3, 20},
	}
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			objs := render(t, dir)
			for _, o := range objs {
				if o.GetKind() == "Secret" {
					t.Errorf("%s renders Secret %s: secrets are referenced, never inlined", dir, o.GetName())
				}
			}
			for _, k := range [][2]string{{"Deployment", "orchard-proxy"}, {"Service", "orchard-proxy"},
				{"PodDisruptionBudget", "orchard-proxy"}, {"HorizontalPodAutoscaler", "orchard-proxy"},
				{"StatefulSet", "orchard-redis"}, {"Deployment", "orchard-envd"}, {"Role", "orchard-envd"}} {
				if find(objs, k[0], k[1]) == nil {
					t.Errorf("%s has no %s %s", dir, k[0], k[1])
				}
			}
			proxy, hpa := find(objs, "Deployment", "orchard-proxy"), find(objs, "HorizontalPodAutoscaler", "orchard-proxy")
			r, _, _ := unstructured.NestedInt64(proxy.Object, "spec", "replicas")
			lo, _, _ := unstructured.NestedInt64(hpa.Object, "spec", "minReplicas")
			hi, _, _ := unstructured.NestedInt64(hpa.Object, "spec", "maxReplicas")
			if got := [3]int64{r, lo, hi}; got != want[dir] {
				t.Errorf("%s: proxy replicas, HPA min, max = %v, want %v", dir, got, want[dir])
			}
			checkEnvdPointsAtProxy(t, objs)
			checkImages(t, objs)
		})
	}
}

func checkEnvdPointsAtProxy(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	envd := find(objs, "Deployment", "orchard-envd")
	cs, _, _ := unstructured.NestedSlice(envd.Object, "spec", "template", "spec", "containers")
	env, _, _ := unstructured.NestedSlice(cs[0].(map[string]any), "env")
	svc := find(objs, "Service", "orchard-proxy")
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	port, _, _ := unstructured.NestedInt64(ports[0].(map[string]any), "port")
	want := "http://orchard-proxy." + svc.GetNamespace() + ".svc:" + strings.TrimSpace(yamlInt(port))
	for _, e := range env {
		if m := e.(map[string]any); m["name"] == "ORCHARD_PROXY_URL" && m["value"] != want {
			t.Errorf("envd ORCHARD_PROXY_URL = %v, want %s", m["value"], want)
		}
	}
}

func yamlInt(n int64) string { b, _ := yaml.Marshal(n); return string(b) }

// checkImages: every container runs a named, tagged image (kustomize's
// images: applied), never the bare placeholder.
func checkImages(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		cs, ok, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		if !ok {
			continue
		}
		for _, c := range cs {
			img := c.(map[string]any)["image"].(string)
			if !slices.Contains([]string{"ghcr.io/orchard-rl/orchard:latest", "docker.io/library/redis:7.4"}, img) {
				t.Errorf("%s %s runs image %q", o.GetKind(), o.GetName(), img)
			}
		}
	}
}
