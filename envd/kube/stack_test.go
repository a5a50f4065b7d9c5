package kube

import (
	"context"
	"net"
	"net/http"
	"os"
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

	"github.com/orchard-rl/orchard/envd/agent"
	"github.com/orchard-rl/orchard/internal/k8stest"
)

func TestMain(m *testing.M) {
	// client-go caches its API-server transports process-wide, so their
	// HTTP/2 read loops outlive the clients; they are not ours to stop.
	// remotecommand's WebSocket heartbeat outlives a canceled exec (a
	// timeout) until its next ping fails, within 5 s.
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) { k8stest.Stop(); os.Exit(code) }),
		goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
		goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
		goleak.IgnoreTopFunction("k8s.io/client-go/tools/remotecommand.(*heartbeat).start"))
}

// stack is the control plane of internal/k8stest (etcd, kube-apiserver in
// RBAC mode, kube-scheduler, kwok, which also answers pods/exec by running
// the command locally), shared by the whole test binary.
var stack struct {
	once    sync.Once
	cs      *kubernetes.Clientset
	kubecfg string
}

// needStack starts the stack on first use, or skips the test when the
// binaries are absent (fails instead when ORCHARD_K8S_TEST=1 asks for
// these tests explicitly).
func needStack(t *testing.T) *kubernetes.Clientset {
	t.Helper()
	s := k8stest.Need(t)
	stack.once.Do(func() { stack.cs, stack.kubecfg = s.Clientset, s.Kubeconfig })
	return s.Clientset
}

func freePort() string { return k8stest.FreePort() }

// newNamespace creates a fresh namespace for one test.
func newNamespace(t *testing.T, _ kubernetes.Interface) string {
	t.Helper()
	return k8stest.Need(t).Namespace(t)
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
