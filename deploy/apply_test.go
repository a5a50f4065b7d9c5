package deploy

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/orchard-rl/orchard/internal/k8stest"
)

// applier applies objects server-side through the dynamic client.
type applier struct {
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

func newApplier(t *testing.T, s *k8stest.Stack) *applier {
	t.Helper()
	dyn, err := dynamic.NewForConfig(s.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &applier{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(s.Clientset.Discovery()))}
}

// apply applies o with server-side apply; dryRun asks the API server to
// validate, default and admit it without storing it.
func (a *applier) apply(ctx context.Context, o *unstructured.Unstructured, dryRun bool) error {
	gvk := o.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	opts := metav1.ApplyOptions{FieldManager: "orchard-deploy-test", Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	var r dynamic.ResourceInterface = a.dyn.Resource(m.Resource)
	if ns := o.GetNamespace(); ns != "" {
		r = a.dyn.Resource(m.Resource).Namespace(ns)
	}
	_, err = r.Apply(ctx, o.GetName(), o, opts)
	return err
}

// TestServerSideDryRun: every object of every overlay, and the export Job,
// is accepted by the real API server (validation, defaulting, admission)
// with a server-side dry-run apply. Namespaces are applied for real first,
// as namespaced objects can only be admitted into one that exists.
func TestServerSideDryRun(t *testing.T) {
	s := k8stest.Need(t)
	a := newApplier(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	job, err := os.ReadFile("base/export-job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The Job goes last: it lives in the namespace the overlays create.
	names := append(slices.Clone(overlays), "base/export-job.yaml")
	sets := map[string][]*unstructured.Unstructured{"base/export-job.yaml": readObjects(t, job)}
	for _, dir := range overlays {
		sets[dir] = render(t, dir)
	}
	for _, name := range names {
		objs := sets[name]
		n := 0
		for _, o := range objs {
			if o.GetKind() == "Namespace" {
				if err := a.apply(ctx, o, false); err != nil {
					t.Fatalf("%s: apply Namespace %s: %v", name, o.GetName(), err)
				}
			}
		}
		for _, o := range objs {
			if err := a.apply(ctx, o, true); err != nil {
				t.Errorf("%s: %s %s/%s rejected: %v", name, o.GetKind(), o.GetNamespace(), o.GetName(), err)
				continue
			}
			n++
		}
		t.Logf("%s: %d objects accepted", name, n)
	}
}

// TestPodsScheduled applies the dev overlay for real and creates one pod
// from each of the proxy's and envd's pod templates, as their ReplicaSet
// would (the test control plane runs no controller manager): the scheduler
// binds both to the kwok node, which runs them.
func TestPodsScheduled(t *testing.T) {
	s := k8stest.Need(t)
	a := newApplier(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	objs := render(t, "overlays/dev")
	for _, kind := range []string{"Namespace", ""} {
		for _, o := range objs {
			if (kind == "Namespace") != (o.GetKind() == "Namespace") {
				continue
			}
			if err := a.apply(ctx, o, false); err != nil {
				t.Fatalf("apply %s %s: %v", o.GetKind(), o.GetName(), err)
			}
		}
	}
	for _, name := range []string{"orchard-proxy", "orchard-envd"} {
		pod := podFromTemplate(t, find(objs, "Deployment", name))
		created, err := s.Clientset.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create %s pod: %v", name, err)
		}
		got := waitRunning(ctx, t, s, created)
		if got.Spec.NodeName != "kwok-node-0" {
			t.Errorf("%s pod on node %q, want kwok-node-0", name, got.Spec.NodeName)
		}
	}
}

// podFromTemplate makes the pod a Deployment's ReplicaSet would create.
func podFromTemplate(t *testing.T, d *unstructured.Unstructured) *corev1.Pod {
	t.Helper()
	tmpl, _, _ := unstructured.NestedMap(d.Object, "spec", "template")
	var pt corev1.PodTemplateSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(tmpl, &pt); err != nil {
		t.Fatal(err)
	}
	pt.ObjectMeta.Namespace = d.GetNamespace()
	pt.ObjectMeta.GenerateName = d.GetName() + "-"
	return &corev1.Pod{ObjectMeta: pt.ObjectMeta, Spec: pt.Spec}
}

// waitRunning watches pod until kwok reports it Running.
func waitRunning(ctx context.Context, t *testing.T, s *k8stest.Stack, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	pods := s.Clientset.CoreV1().Pods(pod.Namespace)
	w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + pod.Name, ResourceVersion: pod.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if p, ok := ev.Object.(*corev1.Pod); ok && p.Status.Phase == corev1.PodRunning {
			return p
		}
	}
	cur, _ := pods.Get(context.Background(), pod.Name, metav1.GetOptions{})
	t.Fatalf("pod %s not running: %v (node %q, status %+v)", pod.Name, ctx.Err(), cur.Spec.NodeName, cur.Status)
	return nil
}
