package kube

import (
	"context"
	"net/http/httptest"
	"slices"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/orchard-rl/orchard/envd"
	"github.com/orchard-rl/orchard/envd/client"
)

// TestKubeNetworkProxy: the shipped proxy-mode NetworkPolicy, applied on
// the real API server, selects exactly the pods of sandboxes in network
// mode proxy (the default), allows them egress only to the proxy's pods
// and DNS, and lets only envd reach their agent.
func TestKubeNetworkProxy(t *testing.T) {
	cs := needStack(t)
	ns := newNamespace(t, cs)
	ctx := context.Background()
	var file networkingv1.NetworkPolicy
	readYAML(t, "../../deploy/base/networkpolicy-proxy.yaml", &file)
	file.Namespace = ns
	if _, err := cs.NetworkingV1().NetworkPolicies(ns).Create(ctx, &file, metav1.CreateOptions{}); err != nil {
		t.Fatalf("deploy/base/networkpolicy-proxy.yaml rejected: %v", err)
	}
	np, err := cs.NetworkingV1().NetworkPolicies(ns).Get(ctx, file.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkProxyPolicy(t, np)
	b := newTestBackend(t, podsAs(t, ""), ns, nil)
	m := envd.NewManager(envd.Options{Backend: b, BackendName: "kubernetes"})
	ts := httptest.NewServer(envd.NewServer(envd.ServerOptions{Manager: m}))
	defer ts.Close()
	c := client.New(client.Options{BaseURL: ts.URL})
	var want []string
	for _, network := range []string{"", envd.NetworkProxy, envd.NetworkNone, envd.NetworkHost} {
		sb, err := c.Create(ctx, envd.Spec{Image: "busybox", Network: network})
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Close()
		if network == "" || network == envd.NetworkProxy {
			want = append(want, "orchard-"+sb.ID())
		}
	}
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		t.Fatal(err)
	}
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range pods.Items {
		got = append(got, p.Name)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("policy %q selects pods %v, want the default and proxy sandboxes' %v", sel, got, want)
	}
}

// checkProxyPolicy asserts the applied policy's exact rules.
func checkProxyPolicy(t *testing.T, np *networkingv1.NetworkPolicy) {
	t.Helper()
	s := np.Spec
	if len(s.PodSelector.MatchLabels) != 1 || s.PodSelector.MatchLabels[LabelNetwork] != envd.NetworkProxy || len(s.PodSelector.MatchExpressions) != 0 {
		t.Errorf("podSelector = %v, want exactly %s=proxy", s.PodSelector, LabelNetwork)
	}
	if !slices.Equal(s.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}) {
		t.Errorf("policyTypes = %v, want Ingress and Egress", s.PolicyTypes)
	}
	type peer struct{ ns, key, value, ports string }
	flatten := func(peers []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort) []peer {
		var out []peer
		var ps string
		for _, p := range ports {
			ps += string(*p.Protocol) + "/" + p.Port.String() + " "
		}
		for _, p := range peers {
			if p.IPBlock != nil || p.NamespaceSelector == nil || p.PodSelector == nil || len(p.PodSelector.MatchLabels) != 1 {
				out = append(out, peer{ns: "unexpected peer"})
				continue
			}
			for k, v := range p.PodSelector.MatchLabels {
				out = append(out, peer{p.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"], k, v, ps})
			}
		}
		return out
	}
	var egress []peer
	for _, r := range s.Egress {
		egress = append(egress, flatten(r.To, r.Ports)...)
	}
	wantEgress := []peer{{"orchard-system", "app.kubernetes.io/name", "orchard-proxy", "TCP/8080 "},
		{"kube-system", "k8s-app", "kube-dns", "UDP/53 TCP/53 "}}
	if !slices.Equal(egress, wantEgress) {
		t.Errorf("egress = %v, want only %v", egress, wantEgress)
	}
	var ingress []peer
	for _, r := range s.Ingress {
		ingress = append(ingress, flatten(r.From, r.Ports)...)
	}
	if want := []peer{{"orchard-system", "app.kubernetes.io/name", "orchard-envd", "TCP/7070 "}}; !slices.Equal(ingress, want) {
		t.Errorf("ingress = %v, want only %v", ingress, want)
	}
}
