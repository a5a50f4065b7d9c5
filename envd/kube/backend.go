package kube

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/orchard-rl/orchard/envd"
)

// Ways an exec reaches a sandbox; see [Options].ExecVia.
const (
	ExecViaAuto      = "auto"
	ExecViaAgent     = "agent"
	ExecViaAPIServer = "apiserver"
)

// Options configures a [Backend].
type Options struct {
	Pods      Pods   // required; NewPods makes one
	Namespace string // where sandbox pods live; default "orchard-sandboxes"
	// AgentImage holds a static orchard binary at /orchard; the init
	// container copies it into each pod. Required.
	AgentImage string
	PullPolicy corev1.PullPolicy // default IfNotPresent
	AgentPort  int               // default 7070
	// RuntimeClass, when set, is every pod's runtimeClassName (gVisor,
	// Kata).
	RuntimeClass string
	// ServiceAccount of sandbox pods; "" means the namespace default
	// (its token is not mounted either way).
	ServiceAccount string
	// Owner is the value of the orchard.dev/owner label; the sweep only
	// touches pods with this owner. Default "envd".
	Owner string
	// WarmSize is how many ready pods to keep per template; 0 disables
	// the warm pool. Warm lists specs to pre-warm at start; specs seen by
	// Create are kept warm too.
	WarmSize int
	Warm     []envd.Spec
	// ReadyTimeout bounds how long Create waits for a pod; default 5 min.
	ReadyTimeout time.Duration
	// Transport reaches agents on pod IPs; default an HTTP/2 (cleartext)
	// transport that keeps one multiplexed connection per pod.
	Transport http.RoundTripper
	// ExecVia is how execs reach a sandbox: ExecViaAgent (the agent on the
	// pod IP only), ExecViaAPIServer (always the API server's pods/exec;
	// Create then trusts the pod's readiness probe and never calls the
	// agent itself) or ExecViaAuto (the agent, and pods/exec when the
	// agent cannot be dialled). Default auto. Files and exec reattach,
	// get and kill always go to the agent.
	ExecVia string
	// RESTConfig reaches the API server for pods/exec. Nil disables that
	// path: auto then means agent, and apiserver is an error.
	RESTConfig *rest.Config
	// AgentWait bounds how long, in auto mode, Create waits for a Ready
	// pod's agent to accept a connection on the pod IP before it settles
	// for exec through the API server; default 10 s.
	AgentWait time.Duration
	Logger    *slog.Logger // nil discards
	// OnPoolChange, when set, is called (without locks held) after a warm
	// pod joins the pool; for metrics and tests.
	OnPoolChange func()
}

// Backend runs each sandbox as a pod and talks to the agent in it on the
// pod IP. It implements envd.Backend and is safe for concurrent use, once
// [Backend.Start] has returned; Close stops its watch and warm-pool loop.
type Backend struct {
	opts     Options
	core     rest.Interface // core/v1, from RESTConfig, for pods/exec; nil without it
	pods     cache.SharedIndexInformer
	cancel   context.CancelFunc // set by Start
	wg       sync.WaitGroup
	refillCh chan struct{}
	life     sync.Mutex   // serialises Start and Close
	state    atomic.Int32 // notStarted, started or closed

	mu        sync.Mutex               // guards following
	waiters   map[string]chan struct{} // pod name -> closed on any change
	sandboxes map[string]string        // sandbox id -> pod name
	tokens    map[string]string        // pod name -> agent token
	warm      map[string][]string      // template -> ready, unclaimed pod names
	pending   map[string]int           // template -> warm pods being created
	templates map[string]envd.Spec     // template -> spec, kept warm
}

// The states of a Backend.
const (
	notStarted = iota
	started
	closed
)

// errNotStarted is what a Backend not started answers: a programming error.
var errNotStarted = errors.New("kube backend: not started (call Start first), or closed")

// New returns a Backend that starts nothing: [Backend.Start] starts the
// watch and the warm pool.
func New(opts Options) (*Backend, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	var core rest.Interface
	if opts.RESTConfig != nil {
		rc, err := coreClient(opts.RESTConfig)
		if err != nil {
			return nil, fmt.Errorf("kube backend: pods/exec: %w", err)
		}
		core = rc
	}
	b := &Backend{opts: opts, core: core, refillCh: make(chan struct{}, 1),
		waiters: map[string]chan struct{}{}, sandboxes: map[string]string{}, tokens: map[string]string{},
		warm: map[string][]string{}, pending: map[string]int{}, templates: map[string]envd.Spec{}}
	b.pods = cache.NewSharedIndexInformer(b.listWatch(), &corev1.Pod{}, 0, cache.Indexers{})
	_, _ = b.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { b.changed(obj) },
		UpdateFunc: func(_, obj any) { b.changed(obj) },
		DeleteFunc: func(obj any) { b.changed(obj) },
	})
	for _, s := range opts.Warm {
		s := s
		if s.Workdir == "" {
			s.Workdir = "/work"
		}
		b.templates[templateKey(&s, opts.RuntimeClass)] = s
	}
	return b, nil
}

// Start starts watching the sandbox pods and, when WarmSize > 0, filling
// the warm pool, and returns once the watch has synced (an error if ctx
// ends first). Both run until ctx is done or [Backend.Close]. Until Start,
// Create and Sweep fail. Start may be called once, before Close.
func (b *Backend) Start(ctx context.Context) error {
	b.life.Lock()
	defer b.life.Unlock()
	switch b.state.Load() {
	case started:
		return errors.New("kube backend: Start called twice")
	case closed:
		return errors.New("kube backend: Start after Close")
	}
	lctx, cancel := context.WithCancel(ctx)
	b.cancel = cancel
	b.wg.Add(1)
	go b.runInformer(lctx)
	if !cache.WaitForCacheSync(ctx.Done(), b.pods.HasSynced) {
		cancel()
		b.wg.Wait()
		return fmt.Errorf("watch pods in %s: %w", b.opts.Namespace, ctx.Err())
	}
	b.wg.Add(1)
	go b.refillLoop(lctx)
	b.state.Store(started)
	b.kick()
	return nil
}

// listWatch lists and watches this owner's sandbox pods.
func (b *Backend) listWatch() *cache.ListWatch {
	sel := b.selector()
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, lo metav1.ListOptions) (runtime.Object, error) {
			lo.LabelSelector = sel
			return b.opts.Pods.List(ctx, b.opts.Namespace, lo)
		},
		WatchFuncWithContext: func(ctx context.Context, lo metav1.ListOptions) (watch.Interface, error) {
			lo.LabelSelector = sel
			return b.opts.Pods.Watch(ctx, b.opts.Namespace, lo)
		},
	}
}

// selector selects the pods this backend manages: its owner's.
func (b *Backend) selector() string {
	return LabelManagedBy + "=" + managedBy + "," + LabelOwner + "=" + b.opts.Owner
}

func (b *Backend) runInformer(ctx context.Context) {
	defer b.wg.Done()
	b.pods.Run(ctx.Done())
}

func (o *Options) defaults() error {
	if o.Pods == nil {
		return errors.New("kube backend: no Kubernetes client")
	}
	if o.AgentImage == "" {
		return errors.New("kube backend: --agent-image is required (an image with a static orchard binary at /orchard)")
	}
	if o.Namespace == "" {
		o.Namespace = "orchard-sandboxes"
	}
	if o.PullPolicy == "" {
		o.PullPolicy = corev1.PullIfNotPresent
	}
	if o.AgentPort == 0 {
		o.AgentPort = 7070
	}
	if o.Owner == "" {
		o.Owner = "envd"
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 5 * time.Minute
	}
	switch {
	case o.ExecVia == "":
		o.ExecVia = ExecViaAuto
	case o.ExecVia != ExecViaAuto && o.ExecVia != ExecViaAgent && o.ExecVia != ExecViaAPIServer:
		return fmt.Errorf("kube backend: exec via %q: want auto, agent or apiserver", o.ExecVia)
	}
	if o.RESTConfig == nil {
		if o.ExecVia == ExecViaAPIServer {
			return errors.New("kube backend: exec via apiserver needs the API server's REST config")
		}
		o.ExecVia = ExecViaAgent
	}
	if o.AgentWait <= 0 {
		o.AgentWait = 10 * time.Second
	}
	if o.Transport == nil {
		t := &http.Transport{DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 4, IdleConnTimeout: 90 * time.Second, Protocols: new(http.Protocols)}
		t.Protocols.SetUnencryptedHTTP2(true)
		o.Transport = t
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Close stops the watch and the warm-pool loop and deletes the warm pods
// (within 10 s); it returns the failed deletes, joined. Claimed pods are
// left alone: envd deletes its sandboxes before it closes the backend, and
// a later sweep catches the rest. A Backend never started closes at once.
func (b *Backend) Close() error {
	b.life.Lock()
	defer b.life.Unlock()
	if b.state.Swap(closed) != started {
		return nil
	}
	b.cancel()
	b.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b.mu.Lock()
	var names []string
	for _, ns := range b.warm {
		names = append(names, ns...)
	}
	b.warm = map[string][]string{}
	b.mu.Unlock()
	var errs []error
	for _, n := range names {
		if err := b.deletePod(ctx, n); err != nil {
			errs = append(errs, fmt.Errorf("warm pod: %w", err))
		}
	}
	return errors.Join(errs...)
}

// changed wakes whoever waits on the pod obj.
func (b *Backend) changed(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	b.mu.Lock()
	if ch, ok := b.waiters[pod.Name]; ok {
		close(ch)
		b.waiters[pod.Name] = make(chan struct{})
	}
	b.mu.Unlock()
}

// watchPod returns the pod's current cached state and a channel closed on
// its next change.
func (b *Backend) watchPod(name string) (*corev1.Pod, <-chan struct{}) {
	b.mu.Lock()
	ch, ok := b.waiters[name]
	if !ok {
		ch = make(chan struct{})
		b.waiters[name] = ch
	}
	b.mu.Unlock()
	obj, exists, _ := b.pods.GetStore().GetByKey(b.opts.Namespace + "/" + name)
	if !exists {
		return nil, ch
	}
	return obj.(*corev1.Pod), ch
}

// waitReady blocks until pod name is ready by the watch and its agent
// answers (see [Backend.checkAgent]), and returns the pod's IP and
// whether envd reached its agent.
func (b *Backend) waitReady(ctx context.Context, name string) (string, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, b.opts.ReadyTimeout)
	defer cancel()
	defer func() { b.mu.Lock(); delete(b.waiters, name); b.mu.Unlock() }()
	for {
		pod, ch := b.watchPod(name)
		if pod != nil && podReady(pod) {
			up, err := b.checkAgent(ctx, name, pod.Status.PodIP)
			return pod.Status.PodIP, up, err
		}
		if pod != nil && podDead(pod) {
			return "", false, fmt.Errorf("%w: pod %s ended (%s) before it was ready", envd.ErrUpstream, name, pod.Status.Phase)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return "", false, fmt.Errorf("wait for pod %s: %w", name, ctx.Err())
		}
	}
}

// checkAgent waits for the agent of Ready pod name at ip to answer and
// reports whether it did. In apiserver mode the pod's readiness probe (the
// kubelet calling the agent) is enough. In auto mode an agent that still
// cannot be dialled after AgentWait is left to the API-server fallback.
func (b *Backend) checkAgent(ctx context.Context, name, ip string) (bool, error) {
	switch b.opts.ExecVia {
	case ExecViaAPIServer:
		return false, nil
	case ExecViaAuto:
		wctx, cancel := context.WithTimeout(ctx, b.opts.AgentWait)
		err := b.health(wctx, ip)
		cancel()
		if err == nil {
			return true, nil
		}
		if ctx.Err() == nil && unreachable(err) {
			b.opts.Logger.Info("sandbox agent unreachable on the pod IP; exec goes through the API server",
				"pod", name, "ip", ip, "err", err)
			return false, nil
		}
	}
	return true, b.health(ctx, ip)
}

// health calls the agent until it answers (the pod can report ready a
// moment before a fresh connection is accepted).
func (b *Backend) health(ctx context.Context, ip string) error {
	url := "http://" + net.JoinHostPort(ip, strconv.Itoa(b.opts.AgentPort)) + "/agent/v1/health"
	var err error
	for wait := 5 * time.Millisecond; ; wait = min(wait*2, time.Second) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		var res *http.Response
		if res, err = b.opts.Transport.RoundTrip(req); err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("agent health: HTTP %d", res.StatusCode)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("agent at %s: %w (last error: %w)", ip, ctx.Err(), err)
		case <-t.C:
		}
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// instance describes for envd the agent of pod name at ip; agentUp is
// whether envd reached it.
func (b *Backend) instance(name, ip, token string, agentUp bool, spec *envd.Spec) *envd.Instance {
	inst := &envd.Instance{BaseURL: "http://" + net.JoinHostPort(ip, strconv.Itoa(b.opts.AgentPort)),
		Transport: b.opts.Transport, Token: token, Workdir: spec.Workdir}
	if b.opts.ExecVia != ExecViaAgent {
		inst.Transport = b.podTransport(name, spec.Workdir, agentUp)
	}
	if spec.Resources.PIDs > 0 {
		inst.Warnings = append(inst.Warnings, "resources.pids is not a pod field; the kubelet's --pod-max-pids applies")
	}
	return inst
}

// deletePod deletes a pod at once; a pod already gone is not an error.
func (b *Backend) deletePod(ctx context.Context, name string) error {
	err := b.opts.Pods.Delete(ctx, b.opts.Namespace, name)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete pod %s: %w", name, err)
	}
	return nil
}

// claimPatch relabels a warm pod as sandbox id's.
func claimPatch(id string) []byte {
	return []byte(`{"metadata":{"labels":{"` + LabelState + `":"claimed","` + LabelSandbox + `":"` + id + `"}}}`)
}

func intOrName(name string) intstr.IntOrString { return intstr.FromString(name) }
