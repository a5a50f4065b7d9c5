package kube

import (
	"context"
	"fmt"
	"net/url"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// Pods is what the backend asks of the API server: the pods of a
// namespace. [NewPods] makes one from a rest.Config.
type Pods interface {
	Create(ctx context.Context, ns string, pod *corev1.Pod) error
	// Patch applies a JSON merge patch.
	Patch(ctx context.Context, ns, name string, merge []byte) error
	// Delete deletes at once (grace period 0).
	Delete(ctx context.Context, ns, name string) error
	List(ctx context.Context, ns string, opts metav1.ListOptions) (*corev1.PodList, error)
	Watch(ctx context.Context, ns string, opts metav1.ListOptions) (watch.Interface, error)
}

// podScheme knows core/v1 alone. The generated clientset's scheme
// registers every API group of Kubernetes: linking it kept about 15 MB of
// every orchard process resident (the proxy's included) and doubled the
// binary, for a backend that only touches pods.
var (
	podScheme = runtime.NewScheme()
	podCodecs = serializer.NewCodecFactory(podScheme)
	podParams = runtime.NewParameterCodec(podScheme)
)

func init() {
	if err := corev1.AddToScheme(podScheme); err != nil {
		panic(err) // a programming error: the types are compiled in
	}
}

// restPods is Pods over a core/v1 REST client.
type restPods struct{ rc rest.Interface }

// NewPods returns the [Pods] of the API server cfg reaches.
func NewPods(cfg *rest.Config) (Pods, error) {
	rc, err := coreClient(cfg)
	if err != nil {
		return nil, err
	}
	return restPods{rc}, nil
}

// coreClient returns a REST client for the core/v1 API of cfg's server.
func coreClient(cfg *rest.Config) (*rest.RESTClient, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &corev1.SchemeGroupVersion
	c.APIPath = "/api"
	c.NegotiatedSerializer = podCodecs.WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client for pods: %w", err)
	}
	return rc, nil
}

func (p restPods) Create(ctx context.Context, ns string, pod *corev1.Pod) error {
	return p.rc.Post().Namespace(ns).Resource("pods").Body(pod).Do(ctx).Error()
}

func (p restPods) Patch(ctx context.Context, ns, name string, merge []byte) error {
	return p.rc.Patch(types.MergePatchType).Namespace(ns).Resource("pods").Name(name).Body(merge).Do(ctx).Error()
}

func (p restPods) Delete(ctx context.Context, ns, name string) error {
	zero := int64(0)
	return p.rc.Delete().Namespace(ns).Resource("pods").Name(name).
		Body(&metav1.DeleteOptions{GracePeriodSeconds: &zero}).Do(ctx).Error()
}

func (p restPods) List(ctx context.Context, ns string, opts metav1.ListOptions) (*corev1.PodList, error) {
	list := new(corev1.PodList)
	err := p.rc.Get().Namespace(ns).Resource("pods").VersionedParams(&opts, podParams).
		Timeout(timeoutOf(opts)).Do(ctx).Into(list)
	return list, err
}

func (p restPods) Watch(ctx context.Context, ns string, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return p.rc.Get().Namespace(ns).Resource("pods").VersionedParams(&opts, podParams).
		Timeout(timeoutOf(opts)).Watch(ctx)
}

// timeoutOf is the client-side timeout of a list or watch: the server's
// (TimeoutSeconds), as the generated clients set it; 0 is none.
func timeoutOf(opts metav1.ListOptions) time.Duration {
	if opts.TimeoutSeconds == nil {
		return 0
	}
	return time.Duration(*opts.TimeoutSeconds) * time.Second
}

// execURL is the pods/exec URL of pod name in ns with opts.
func execURL(rc rest.Interface, ns, name string, opts *corev1.PodExecOptions) *url.URL {
	return rc.Post().Namespace(ns).Resource("pods").Name(name).SubResource("exec").VersionedParams(opts, podParams).URL()
}
