package kube

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/orchard-rl/orchard/envd/agent"
)

func TestMain(m *testing.M) {
	// client-go caches its API-server transports process-wide, so their
	// HTTP/2 read loops outlive the clients; they are not ours to stop.
	// remotecommand's WebSocket heartbeat outlives a canceled exec (a
	// timeout) until its next ping fails, within 5 s.
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) { stopStack(); os.Exit(code) }),
		goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
		goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
		goleak.IgnoreTopFunction("k8s.io/client-go/tools/remotecommand.(*heartbeat).start"))
}

// stack is one control plane (etcd, kube-apiserver in RBAC mode,
// kube-scheduler, kwok, which also answers pods/exec by running the
// command locally) started by deploy/testenv/stack.sh for the whole test
// binary.
var stack struct {
	once    sync.Once
	err     error
	skip    string
	dir     string
	env     []string
	cs      *kubernetes.Clientset
	kubecfg string
}

// k8sBinDir is where build-bins.sh put the binaries (make test-k8s builds
// them once; see deploy/testenv/README.md).
func k8sBinDir() string {
	if d := os.Getenv("ORCHARD_K8S_BIN"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "orchard-k8s", "bin")
}

// needStack starts the stack on first use, or skips the test when the
// binaries are absent (fails instead when ORCHARD_K8S_TEST=1 asks for
// these tests explicitly).
func needStack(t *testing.T) *kubernetes.Clientset {
	t.Helper()
	stack.once.Do(startStack)
	if stack.skip != "" {
		if os.Getenv("ORCHARD_K8S_TEST") == "1" {
			t.Fatalf("ORCHARD_K8S_TEST=1 but %s", stack.skip)
		}
		t.Skip(stack.skip)
	}
	if stack.err != nil {
		t.Fatalf("start control plane: %v", stack.err)
	}
	return stack.cs
}

func freePort() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "0"
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

func startStack() {
	bin := k8sBinDir()
	for _, b := range []string{"etcd", "kube-apiserver", "kube-scheduler", "kwok", "kwok-stages.yaml"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			stack.skip = fmt.Sprintf("Kubernetes test binaries not in %s (build: deploy/testenv/build-bins.sh %s)", bin, bin)
			return
		}
	}
	stack.dir, stack.err = os.MkdirTemp("", "orchard-k8s-stack-")
	if stack.err != nil {
		return
	}
	stack.env = append(os.Environ(), "BIN="+bin, "ST="+stack.dir, "AUTHZ=RBAC",
		"ETCD_PORT="+freePort(), "ETCD_PEER_PORT="+freePort(), "KAS_PORT="+freePort(),
		"KWOK_CIDR=127.1.0.0/16", "KWOK_PORT="+freePort())
	cmd := exec.Command("bash", "../../deploy/testenv/stack.sh", "up")
	cmd.Env = stack.env
	if out, err := cmd.CombinedOutput(); err != nil {
		stack.err = fmt.Errorf("stack.sh up: %w: %s", err, out)
		return
	}
	stack.kubecfg = filepath.Join(stack.dir, "kubeconfig")
	rc, err := clientcmd.BuildConfigFromFlags("", stack.kubecfg)
	if err != nil {
		stack.err = err
		return
	}
	rc.QPS, rc.Burst = 500, 1000
	if stack.cs, stack.err = kubernetes.NewForConfig(rc); stack.err != nil {
		return
	}
	stack.err = addNode(stack.cs)
}

func stopStack() {
	if stack.dir == "" {
		return
	}
	cmd := exec.Command("bash", "../../deploy/testenv/stack.sh", "down")
	cmd.Env = stack.env
	_ = cmd.Run()
	_ = os.RemoveAll(stack.dir)
}

// addNode registers the fake kwok node from deploy/testenv/kwok-node.yaml.
func addNode(cs *kubernetes.Clientset) error {
	data, err := os.ReadFile("../../deploy/testenv/kwok-node.yaml")
	if err != nil {
		return err
	}
	var node corev1.Node
	if err := yaml.Unmarshal(data, &node); err != nil {
		return err
	}
	_, err = cs.CoreV1().Nodes().Create(context.Background(), &node, metav1.CreateOptions{})
	return err
}

// newNamespace creates a fresh namespace for one test.
func newNamespace(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	ns := fmt.Sprintf("t-%d", time.Now().UnixNano()%1e9)
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return ns
}

// labelNoAgent on a pod (value "off") makes the test kubelet start no
// agent for it, as if envd could not reach the pod IP.
const labelNoAgent = "orchard-test/agent"

// kubelet plays the kubelet's part that kwok leaves out: for every
// running pod in its namespace (but those labelled labelNoAgent=off) it
// serves an in-sandbox agent on the pod IP (a loopback address from
// kwok's 127.1.0.0/16), with the token from the pod's env, and stops it
// when the pod goes away.
type kubelet struct {
	t      *testing.T
	ns     string
	port   int
	mu     sync.Mutex
	served map[string]*http.Server // pod name ->
	agents map[string]*agent.Server
	dead   map[string]bool // pods whose agent was killed
}

func startKubelet(t *testing.T, cs kubernetes.Interface, ns string, port int) *kubelet {
	t.Helper()
	k := &kubelet{t: t, ns: ns, port: port, served: map[string]*http.Server{}, agents: map[string]*agent.Server{},
		dead: map[string]bool{}}
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().Pods().Informer()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { k.sync(obj) },
		UpdateFunc: func(_, obj any) { k.sync(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				k.stop(pod.Name)
			}
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { inf.Run(ctx.Done()); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		k.mu.Lock()
		names := make([]string, 0, len(k.served))
		for n := range k.served {
			names = append(names, n)
		}
		k.mu.Unlock()
		for _, n := range names {
			k.stop(n)
		}
	})
	return k
}

// kill stops pod name's agent for good, as if it had crashed.
func (k *kubelet) kill(name string) {
	k.mu.Lock()
	k.dead[name] = true
	k.mu.Unlock()
	k.stop(name)
}

func (k *kubelet) sync(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if pod.DeletionTimestamp != nil {
		k.stop(pod.Name)
		return
	}
	if pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" || pod.Labels[labelNoAgent] == "off" {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.served[pod.Name]; ok || k.dead[pod.Name] {
		return
	}
	token := ""
	for _, e := range pod.Spec.Containers[0].Env {
		if e.Name == tokenEnv {
			token = e.Value
		}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(k.port)))
	if err != nil {
		k.t.Errorf("kubelet: listen for pod %s: %v", pod.Name, err)
		return
	}
	wd, _ := os.MkdirTemp("", "orchard-pod-")
	a := agent.New(agent.Options{Workdir: wd, Token: token})
	srv := &http.Server{Handler: a, Protocols: new(http.Protocols)}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	k.served[pod.Name], k.agents[pod.Name] = srv, a
	go func() { _ = srv.Serve(ln) }()
}

func (k *kubelet) stop(name string) {
	k.mu.Lock()
	srv, a := k.served[name], k.agents[name]
	delete(k.served, name)
	delete(k.agents, name)
	k.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
		_ = a.Close()
	}
}

// waitGone blocks until pod name no longer exists, by watching it.
func waitGone(t *testing.T, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return
	}
	for ev := range w.ResultChan() {
		if ev.Type == "DELETED" {
			return
		}
	}
	t.Fatalf("pod %s/%s not deleted: %v", ns, name, ctx.Err())
}
