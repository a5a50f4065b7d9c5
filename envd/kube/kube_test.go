package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"
	"sigs.k8s.io/yaml"

	"github.com/orchard-rl/orchard/envd"
	"github.com/orchard-rl/orchard/envd/client"
)

// newBackend starts a backend and a kubelet on namespace ns.
func newTestBackend(t *testing.T, pods Pods, ns string, mod func(*Options)) *Backend {
	t.Helper()
	port, _ := strconv.Atoi(freePort())
	startKubelet(t, stack.cs, ns, port)
	opts := Options{Pods: pods, Namespace: ns, AgentImage: "ghcr.io/orchard-rl/orchard:test", AgentPort: port, ReadyTimeout: time.Minute}
	if mod != nil {
		mod(&opts)
	}
	b, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	return b
}

// TestKubePodSpec creates a sandbox through envd's API and checks the pod
// the real API server accepted, then runs a command in it and deletes it.
func TestKubePodSpec(t *testing.T) {
	cs := needStack(t)
	ns := newNamespace(t, cs)
	ctx := context.Background()
	if _, err := cs.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "gvisor"}, Handler: "runsc"}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	b := newTestBackend(t, podsAs(t, ""), ns, func(o *Options) { o.RuntimeClass = "gvisor" })
	m := envd.NewManager(envd.Options{Backend: b, BackendName: "kubernetes"})
	ts := httptest.NewServer(envd.NewServer(envd.ServerOptions{Manager: m}))
	defer ts.Close()
	c := client.New(client.Options{BaseURL: ts.URL})
	sb, err := c.Create(ctx, envd.Spec{Image: "python:3.12-slim", Command: []string{"python", "-m", "http.server"},
		Workdir: "/workspace", Resources: envd.Resources{CPU: "500m", Memory: "256Mi"}, Labels: map[string]string{"team": "rl"}})
	if err != nil {
		t.Fatal(err)
	}
	pod, err := cs.CoreV1().Pods(ns).Get(ctx, "orchard-"+sb.ID(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkPod(t, pod, sb.ID(), b.opts.AgentPort)
	res, err := sb.Exec(ctx, envd.ExecRequest{Shell: "echo in-pod; pwd"})
	if err != nil || !strings.HasPrefix(res.Stdout, "in-pod\n") || res.ExitCode != 0 {
		t.Fatalf("exec = %+v, %v", res, err)
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	waitGone(t, cs, ns, pod.Name)
}

func checkPod(t *testing.T, pod *corev1.Pod, id string, port int) {
	t.Helper()
	c := pod.Spec.Containers[0]
	wantCmd := []string{"/orchard-bin/orchard", "sandbox-agent", "--listen", ":" + strconv.Itoa(port), "--workdir", "/workspace", "--"}
	checks := []struct {
		name      string
		got, want any
	}{
		{"init command", pod.Spec.InitContainers[0].Command, []string{"/orchard", "sandbox-agent", "--install", "/orchard-bin/orchard"}},
		{"init image", pod.Spec.InitContainers[0].Image, "ghcr.io/orchard-rl/orchard:test"},
		{"image", c.Image, "python:3.12-slim"},
		{"command", c.Command, wantCmd},
		{"args", c.Args, []string{"python", "-m", "http.server"}},
		{"volumes", []string{pod.Spec.Volumes[0].Name, pod.Spec.Volumes[1].Name}, []string{"orchard-bin", "work"}},
		{"emptyDir", pod.Spec.Volumes[0].EmptyDir != nil && pod.Spec.Volumes[1].EmptyDir != nil, true},
		{"mounts", c.VolumeMounts[0].MountPath + " " + c.VolumeMounts[1].MountPath, "/orchard-bin /workspace"},
		{"labels", []string{pod.Labels[LabelManagedBy], pod.Labels[LabelOwner], pod.Labels[LabelState], pod.Labels[LabelSandbox], pod.Labels["team"]},
			[]string{"orchard-envd", "envd", "claimed", id, "rl"}},
		{"cpu", c.Resources.Limits.Cpu().String() + " " + c.Resources.Requests.Cpu().String(), "500m 500m"},
		{"memory", c.Resources.Limits.Memory().String(), "256Mi"},
		{"runtime class", *pod.Spec.RuntimeClassName, "gvisor"},
		{"no sa token", *pod.Spec.AutomountServiceAccountToken, false},
		{"restart", pod.Spec.RestartPolicy, corev1.RestartPolicyNever},
	}
	for _, ck := range checks {
		if !reflect.DeepEqual(ck.got, ck.want) {
			t.Errorf("pod %s = %v, want %v", ck.name, ck.got, ck.want)
		}
	}
}

// TestKubeWarmPool fills a pool of 2, claims one (a label patch, no pod
// creation), and sees the pool refill to 2.
func TestKubeWarmPool(t *testing.T) {
	cs := needStack(t)
	ns := newNamespace(t, cs)
	ctx := context.Background()
	changed := make(chan struct{}, 16)
	spec := envd.Spec{Image: "busybox:1.36", Workdir: "/work"}
	b := newTestBackend(t, podsAs(t, ""), ns, func(o *Options) {
		o.WarmSize, o.Warm = 2, []envd.Spec{spec}
		o.OnPoolChange = func() { changed <- struct{}{} }
	})
	key := templateKey(&spec, "")
	<-changed
	<-changed
	if got := b.Warm()[key]; got != 2 {
		t.Fatalf("warm = %d, want 2", got)
	}
	start := time.Now()
	inst, err := b.Create(ctx, "sb-claim1", &spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("claim took %s", time.Since(start))
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: LabelSandbox + "=sb-claim1"})
	if err != nil || len(pods.Items) != 1 || !strings.HasPrefix(pods.Items[0].Name, "orchard-warm-") || pods.Items[0].Labels[LabelState] != "claimed" {
		t.Fatalf("claimed pods = %+v, %v; want one relabelled warm pod", pods, err)
	}
	if !strings.Contains(inst.BaseURL, pods.Items[0].Status.PodIP) {
		t.Errorf("instance URL %s, pod IP %s", inst.BaseURL, pods.Items[0].Status.PodIP)
	}
	<-changed // refilled
	if got := b.Warm()[key]; got != 2 {
		t.Errorf("warm after refill = %d, want 2", got)
	}
	if err := b.Delete(ctx, "sb-claim1"); err != nil {
		t.Fatal(err)
	}
	waitGone(t, cs, ns, pods.Items[0].Name)
}

// TestKubeSweep leaves pods as a crashed envd would and sweeps them.
func TestKubeSweep(t *testing.T) {
	cs := needStack(t)
	ns := newNamespace(t, cs)
	ctx := context.Background()
	b := newTestBackend(t, podsAs(t, ""), ns, nil)
	spec := envd.Spec{Image: "busybox:1.36", Workdir: "/work"}
	for _, p := range []struct{ name, state, id, owner string }{
		{"orchard-sb-old", "claimed", "sb-old", "envd"},
		{"orchard-warm-old", "warm", "", "envd"},
		{"orchard-sb-kept", "claimed", "sb-kept", "envd"},
		{"orchard-sb-other", "claimed", "sb-other", "someone-else"},
	} {
		pod := b.podFor(p.name, "tok", "k", &spec)
		pod.Labels[LabelState], pod.Labels[LabelOwner] = p.state, p.owner
		if p.id != "" {
			pod.Labels[LabelSandbox] = p.id
		}
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	n, err := b.Sweep(ctx, func(id string) bool { return id == "sb-kept" })
	if err != nil || n != 2 {
		t.Fatalf("Sweep = %d, %v; want 2", n, err)
	}
	waitGone(t, cs, ns, "orchard-sb-old")
	waitGone(t, cs, ns, "orchard-warm-old")
	for _, name := range []string{"orchard-sb-kept", "orchard-sb-other"} {
		if _, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("pod %s: %v, want kept", name, err)
		}
	}
}

// TestKubeRBAC runs the backend as the ServiceAccount of deploy/base,
// with the API server authorizing by RBAC: the Role must allow every call
// the backend makes, and nothing it does not need.
func TestKubeRBAC(t *testing.T) {
	cs := needStack(t)
	ctx := context.Background()
	var role rbacv1.Role
	var binding rbacv1.RoleBinding
	readYAML(t, "../../deploy/base/role.yaml", &role)
	readYAML(t, "../../deploy/base/rolebinding.yaml", &binding)
	if !reflect.DeepEqual(role.Rules, Rules) {
		t.Fatalf("deploy/base/role.yaml rules = %+v, want kube.Rules %+v", role.Rules, Rules)
	}
	ns := newNamespace(t, cs)
	saNS := newNamespace(t, cs)
	role.Namespace, binding.Namespace, binding.Subjects[0].Namespace = ns, ns, saNS
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: binding.Subjects[0].Name, Namespace: saNS}}
	if _, err := cs.CoreV1().ServiceAccounts(saNS).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, &role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, &binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tok, err := cs.CoreV1().ServiceAccounts(saNS).CreateToken(ctx, sa.Name, &authnv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	saClient := clientAs(t, tok.Status.Token)
	spec := envd.Spec{Image: "busybox:1.36", Workdir: t.TempDir()}
	b := newTestBackend(t, podsAs(t, tok.Status.Token), ns, func(o *Options) {
		o.WarmSize, o.Warm = 1, []envd.Spec{spec}
		o.RESTConfig, o.ExecVia = restConfig(t, tok.Status.Token), ExecViaAPIServer
	})
	inst, err := b.Create(ctx, "sb-rbac1", &spec)
	if err != nil {
		t.Fatalf("create as envd's ServiceAccount: %v", err)
	}
	if res := instExec(t, inst, envd.ExecRequest{Cmd: []string{"pwd"}}); res.ExitCode != 0 || res.Stdout != spec.Workdir+"\n" {
		t.Fatalf("exec through the API server as envd's ServiceAccount = %+v", res)
	}
	// envd tries WebSocket first: a GET that needs "get" and, since
	// Kubernetes 1.35, "create" on pods/exec.
	var out bytes.Buffer
	ws, err := remotecommand.NewWebSocketExecutor(restConfig(t, tok.Status.Token), http.MethodGet,
		saClient.CoreV1().RESTClient().Get().Namespace(ns).Resource("pods").Name("orchard-sb-rbac1").SubResource("exec").
			VersionedParams(&corev1.PodExecOptions{Container: container, Command: []string{"echo", "ws"}, Stdout: true}, scheme.ParameterCodec).URL().String())
	if err != nil {
		t.Fatal(err)
	}
	if err := ws.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out}); err != nil || out.String() != "ws\n" {
		t.Fatalf("websocket exec as envd's ServiceAccount = %q, %v", out.String(), err)
	}
	if _, err := b.Create(ctx, "sb-rbac2", &spec); err != nil {
		t.Fatalf("second create as envd's ServiceAccount: %v", err)
	}
	if _, err := b.Sweep(ctx, func(string) bool { return true }); err != nil {
		t.Fatalf("sweep as envd's ServiceAccount: %v", err)
	}
	for _, id := range []string{"sb-rbac1", "sb-rbac2"} {
		if err := b.Delete(ctx, id); err != nil {
			t.Fatalf("delete as envd's ServiceAccount: %v", err)
		}
	}
	denied := []struct {
		name string
		call func() error
	}{
		{"secrets", func() error { _, err := saClient.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); return err }},
		{"pods elsewhere", func() error { _, err := saClient.CoreV1().Pods(saNS).List(ctx, metav1.ListOptions{}); return err }},
		{"update pod", func() error {
			_, err := saClient.CoreV1().Pods(ns).Update(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: ns}}, metav1.UpdateOptions{})
			return err
		}},
		{"attach", func() error {
			return saClient.CoreV1().RESTClient().Post().Namespace(ns).Resource("pods").Name("x").SubResource("attach").Do(ctx).Error()
		}},
		{"port-forward", func() error {
			return saClient.CoreV1().RESTClient().Post().Namespace(ns).Resource("pods").Name("x").SubResource("portforward").Do(ctx).Error()
		}},
		{"exec elsewhere", func() error {
			return saClient.CoreV1().RESTClient().Post().Namespace(saNS).Resource("pods").Name("x").SubResource("exec").Do(ctx).Error()
		}},
	}
	for _, d := range denied {
		if err := d.call(); !apierrors.IsForbidden(err) {
			t.Errorf("%s as envd's ServiceAccount = %v, want forbidden", d.name, err)
		}
	}
}

// instExec runs req through the transport of inst, as envd's forwarder
// does, and returns the agent-format result.
func instExec(t *testing.T, inst *envd.Instance, req envd.ExecRequest) envd.ExecResult {
	t.Helper()
	body, _ := json.Marshal(req)
	r, _ := http.NewRequest(http.MethodPost, inst.BaseURL+"/agent/v1/exec", bytes.NewReader(body))
	res, err := inst.Transport.RoundTrip(r)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out envd.ExecResult
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("exec: HTTP %d, %v", res.StatusCode, err)
	}
	return out
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// clientAs returns a client for the test API server with bearer token tok.
func clientAs(t *testing.T, tok string) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(restConfig(t, tok))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// restConfig returns the test API server's config with bearer token tok,
// or the admin's when tok is "".
// podsAs is the Pods client of the stack's API server, as the service
// account whose token tok is ("" for the admin).
func podsAs(t *testing.T, tok string) Pods {
	t.Helper()
	p, err := NewPods(restConfig(t, tok))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func restConfig(t *testing.T, tok string) *rest.Config {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", stack.kubecfg)
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		rc = rest.AnonymousClientConfig(rc)
		rc.BearerToken = tok
	}
	rc.QPS, rc.Burst = 500, 1000
	return rc
}

// TestKubeNetworkNone: a sandbox with network "none" gets the label the
// shipped NetworkPolicy selects, and that policy is accepted by the real
// API server and selects exactly such pods.
func TestKubeNetworkNone(t *testing.T) {
	cs := needStack(t)
	ns := newNamespace(t, cs)
	ctx := context.Background()
	var np networkingv1.NetworkPolicy
	readYAML(t, "../../deploy/base/networkpolicy.yaml", &np)
	np.Namespace = ns
	if _, err := cs.NetworkingV1().NetworkPolicies(ns).Create(ctx, &np, metav1.CreateOptions{}); err != nil {
		t.Fatalf("deploy/base/networkpolicy.yaml rejected: %v", err)
	}
	if got := np.Spec.PodSelector.MatchLabels[LabelNetwork]; got != "none" || len(np.Spec.Egress) != 0 {
		t.Fatalf("policy selects %v with %d egress rules", np.Spec.PodSelector.MatchLabels, len(np.Spec.Egress))
	}
	b := newTestBackend(t, podsAs(t, ""), ns, nil)
	m := envd.NewManager(envd.Options{Backend: b, BackendName: "kubernetes"})
	ts := httptest.NewServer(envd.NewServer(envd.ServerOptions{Manager: m}))
	defer ts.Close()
	c := client.New(client.Options{BaseURL: ts.URL})
	for _, network := range []string{"none", ""} {
		sb, err := c.Create(ctx, envd.Spec{Image: "busybox", Network: network})
		if err != nil {
			t.Fatal(err)
		}
		pod, err := cs.CoreV1().Pods(ns).Get(ctx, "orchard-"+sb.ID(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := pod.Labels[LabelNetwork] == "none", network == "none"; got != want {
			t.Errorf("network %q: pod labels %v", network, pod.Labels)
		}
		if err := sb.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
