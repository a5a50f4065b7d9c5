package kube

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/orchard-rl/orchard/envd"
)

// Create claims a warm pod that fits spec (O(1): one label patch) or
// creates a pod and waits for the watch to see it ready.
func (b *Backend) Create(ctx context.Context, id string, spec *envd.Spec) (*envd.Instance, error) {
	if b.state.Load() != started {
		return nil, errNotStarted
	}
	if spec.Image == "" {
		return nil, envd.Errorf(envd.ErrBadRequest, "image is required on the Kubernetes backend (the sandbox container image)")
	}
	if err := validateResources(spec.Resources); err != nil {
		return nil, err
	}
	key := templateKey(spec, b.opts.RuntimeClass)
	if b.opts.WarmSize > 0 {
		defer b.kick()
		b.mu.Lock()
		if _, ok := b.templates[key]; !ok {
			s := *spec
			s.Env, s.Episode, s.Labels, s.TTL, s.IdleTimeout = nil, nil, nil, 0, 0
			b.templates[key] = s
		}
		b.mu.Unlock()
		if inst, err := b.claim(ctx, id, key, spec); inst != nil || err != nil {
			return inst, err
		}
	}
	name := "orchard-" + id
	token := randomHex(16)
	pod := b.podFor(name, token, key, spec)
	pod.Labels[LabelState], pod.Labels[LabelSandbox] = "claimed", id
	if err := b.opts.Pods.Create(ctx, b.opts.Namespace, pod); err != nil {
		return nil, fmt.Errorf("%w: create pod %s: %w", envd.ErrUpstream, name, err)
	}
	b.mu.Lock()
	b.sandboxes[id], b.tokens[name] = name, token
	b.mu.Unlock()
	ip, agentUp, err := b.waitReady(ctx, name)
	if err != nil {
		_ = b.Delete(context.WithoutCancel(ctx), id)
		return nil, err
	}
	return b.instance(name, ip, token, agentUp, spec), nil
}

// claim takes a ready warm pod of template key for sandbox id; it returns
// nil, nil when none is ready.
func (b *Backend) claim(ctx context.Context, id, key string, spec *envd.Spec) (*envd.Instance, error) {
	for {
		b.mu.Lock()
		names := b.warm[key]
		if len(names) == 0 {
			b.mu.Unlock()
			return nil, nil
		}
		name := names[len(names)-1]
		b.warm[key] = names[:len(names)-1]
		token := b.tokens[name]
		b.mu.Unlock()
		pod, _ := b.watchPod(name)
		b.mu.Lock()
		delete(b.waiters, name)
		b.mu.Unlock()
		if pod == nil || !podReady(pod) {
			_ = b.deletePod(ctx, name) // went bad while warm; try the next one
			continue
		}
		err := b.opts.Pods.Patch(ctx, b.opts.Namespace, name, claimPatch(id))
		if err != nil {
			_ = b.deletePod(ctx, name)
			return nil, fmt.Errorf("%w: claim pod %s: %w", envd.ErrUpstream, name, err)
		}
		b.mu.Lock()
		b.sandboxes[id] = name
		b.mu.Unlock()
		return b.instance(name, pod.Status.PodIP, token, true, spec), nil
	}
}

// Delete deletes sandbox id's pod (grace period 0; the kubelet kills
// every process in it).
func (b *Backend) Delete(ctx context.Context, id string) error {
	b.mu.Lock()
	name, ok := b.sandboxes[id]
	delete(b.sandboxes, id)
	delete(b.tokens, name)
	b.mu.Unlock()
	if !ok {
		name = "orchard-" + id
	}
	return b.deletePod(ctx, name)
}

// Sweep deletes this owner's pods that no live sandbox or warm-pool entry
// accounts for: claimed pods whose sandbox keep rejects, and warm pods an
// earlier envd created.
func (b *Backend) Sweep(ctx context.Context, keep func(string) bool) (int, error) {
	if b.state.Load() != started {
		return 0, errNotStarted
	}
	list, err := b.opts.Pods.List(ctx, b.opts.Namespace, metav1.ListOptions{LabelSelector: b.selector()})
	if err != nil {
		return 0, fmt.Errorf("list sandbox pods: %w", err)
	}
	n := 0
	var errs []error
	for _, pod := range list.Items {
		if b.accounted(pod.Name, pod.Labels[LabelSandbox], keep) {
			continue
		}
		if err := b.deletePod(ctx, pod.Name); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// accounted reports whether pod name (of sandbox id, if claimed) belongs
// to this backend's live state.
func (b *Backend) accounted(name, id string, keep func(string) bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if id != "" {
		_, live := b.sandboxes[id]
		return live || keep(id)
	}
	if _, ok := b.tokens[name]; ok {
		return true // warm, ours
	}
	return false
}

// kick asks the refill loop to top up the warm pool.
func (b *Backend) kick() {
	select {
	case b.refillCh <- struct{}{}:
	default:
	}
}

// refillLoop keeps WarmSize ready-or-pending pods per template.
func (b *Backend) refillLoop(ctx context.Context) {
	defer b.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.refillCh:
		}
		for key, n := range b.deficit() {
			for range n {
				b.wg.Add(1)
				go b.warmOne(ctx, key)
			}
		}
	}
}

// deficit returns, per template, how many warm pods to start now, and
// counts them as pending.
func (b *Backend) deficit() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]int{}
	for key := range b.templates {
		if d := b.opts.WarmSize - len(b.warm[key]) - b.pending[key]; d > 0 {
			out[key] = d
			b.pending[key] += d
		}
	}
	return out
}

// warmOne creates one warm pod of template key and adds it to the pool
// once ready.
func (b *Backend) warmOne(ctx context.Context, key string) {
	defer b.wg.Done()
	b.mu.Lock()
	spec := b.templates[key]
	b.mu.Unlock()
	name := "orchard-warm-" + randomHex(6)
	token := randomHex(16)
	ok := false
	defer func() {
		b.mu.Lock()
		b.pending[key]--
		if ok {
			b.warm[key] = append(b.warm[key], name)
		} else {
			delete(b.tokens, name)
		}
		b.mu.Unlock()
		if ok && b.opts.OnPoolChange != nil {
			b.opts.OnPoolChange()
		}
	}()
	b.mu.Lock()
	b.tokens[name] = token
	b.mu.Unlock()
	if err := b.opts.Pods.Create(ctx, b.opts.Namespace, b.podFor(name, token, key, &spec)); err != nil {
		if ctx.Err() == nil {
			b.opts.Logger.Warn("create warm pod", "template", key, "err", err)
		}
		return
	}
	if _, _, err := b.waitReady(ctx, name); err != nil {
		if ctx.Err() == nil {
			b.opts.Logger.Warn("warm pod not ready", "pod", name, "err", err)
		}
		_ = b.deletePod(context.WithoutCancel(ctx), name)
		return
	}
	ok = true
}

// Warm returns how many ready warm pods each template has.
func (b *Backend) Warm() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]int{}
	for k, v := range b.warm {
		out[k] = len(v)
	}
	return out
}
