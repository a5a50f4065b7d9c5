package kube

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/orchard-rl/orchard/envd"
)

// Labels envd puts on every pod it creates; the sweep selects on them.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by" // always "orchard-envd"
	LabelOwner     = "orchard.dev/owner"            // Options.Owner
	LabelState     = "orchard.dev/state"            // "warm" or "claimed"
	LabelSandbox   = "orchard.dev/sandbox"          // sandbox id once claimed
	LabelTemplate  = "orchard.dev/template"         // hash of the pod-shaping spec fields
	// LabelNetwork is the network mode ("none" or "proxy") of a
	// sandbox's pod; host-mode pods have none. The NetworkPolicies in
	// deploy/base/networkpolicy.yaml (none: no egress) and
	// networkpolicy-proxy.yaml (proxy: egress to the proxy's pods and DNS
	// only) select on it, and both let only envd reach the agent.
	LabelNetwork = "orchard.dev/network"
	managedBy    = "orchard-envd"

	container  = "sandbox" // the sandbox container's name, which pods/exec targets
	binVolume  = "orchard-bin"
	binDir     = "/orchard-bin"
	workVolume = "work"
	tokenEnv   = "ORCHARD_AGENT_TOKEN"
)

// Rules are the RBAC rules envd's ServiceAccount needs in the sandbox
// namespace: exactly the calls this package makes. deploy/base/role.yaml
// grants these, and a test checks that the two agree. pods/exec (the exec
// fallback) needs "get" for the WebSocket upgrade, which is a GET, and
// "create" for the SPDY one (a POST); since Kubernetes 1.35 the API server
// also checks "create" on WebSocket upgrades
// (AuthorizePodWebsocketUpgradeCreatePermission).
var Rules = []rbacv1.PolicyRule{{
	APIGroups: []string{""},
	Resources: []string{"pods"},
	Verbs:     []string{"create", "delete", "get", "list", "patch", "watch"},
}, {
	APIGroups: []string{""},
	Resources: []string{"pods/exec"},
	Verbs:     []string{"create", "get"},
}}

// templateKey hashes the spec fields that shape a pod, so that warm pods
// are only claimed by specs they fit. Env, TTL and episode are applied at
// claim or exec time and do not count.
func templateKey(spec *envd.Spec, runtimeClass string) string {
	b, _ := json.Marshal([]any{spec.Image, spec.Command, spec.Workdir, spec.Resources, runtimeClass, networkLabel(spec)})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// podFor builds the pod of one sandbox: an init container copies the
// orchard binary into a shared emptyDir, and the user's image runs
// "orchard sandbox-agent -- <command>" so the image itself is unchanged.
func (b *Backend) podFor(name, token, key string, spec *envd.Spec) *corev1.Pod {
	o := b.opts
	agentCmd := []string{binDir + "/orchard", "sandbox-agent", "--listen", ":" + strconv.Itoa(o.AgentPort), "--workdir", spec.Workdir, "--"}
	no := false
	grace := int64(1)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: o.Namespace,
			Labels: map[string]string{LabelManagedBy: managedBy, LabelOwner: o.Owner,
				LabelState: "warm", LabelTemplate: key},
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			TerminationGracePeriodSeconds: &grace,
			InitContainers: []corev1.Container{{
				Name:            "orchard-agent-install",
				Image:           o.AgentImage,
				ImagePullPolicy: o.PullPolicy,
				Command:         []string{"/orchard", "sandbox-agent", "--install", binDir + "/orchard"},
				VolumeMounts:    []corev1.VolumeMount{{Name: binVolume, MountPath: binDir}},
			}},
			Containers: []corev1.Container{{
				Name:            container,
				Image:           spec.Image,
				ImagePullPolicy: o.PullPolicy,
				Command:         agentCmd,
				Args:            spec.Command,
				WorkingDir:      spec.Workdir,
				Env:             []corev1.EnvVar{{Name: tokenEnv, Value: token}},
				Ports:           []corev1.ContainerPort{{Name: "agent", ContainerPort: int32(o.AgentPort)}},
				Resources:       resourcesFor(spec.Resources),
				VolumeMounts: []corev1.VolumeMount{
					{Name: binVolume, MountPath: binDir, ReadOnly: true},
					{Name: workVolume, MountPath: spec.Workdir},
				},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
					Path: "/agent/v1/health", Port: intOrName("agent")}}, PeriodSeconds: 1},
			}},
			Volumes: []corev1.Volume{
				{Name: binVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: workVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		},
	}
	if l := networkLabel(spec); l != "" {
		pod.Labels[LabelNetwork] = l
	}
	if spec.Resources.Disk != "" {
		q := resource.MustParse(spec.Resources.Disk)
		pod.Spec.Volumes[1].EmptyDir.SizeLimit = &q
	}
	for k, v := range spec.Labels {
		if _, taken := pod.Labels[k]; !taken {
			pod.Labels[k] = v
		}
	}
	if o.RuntimeClass != "" {
		rc := o.RuntimeClass
		pod.Spec.RuntimeClassName = &rc
	}
	if o.ServiceAccount != "" {
		pod.Spec.ServiceAccountName = o.ServiceAccount
	}
	return pod
}

// networkLabel is the [LabelNetwork] value of spec's pods: its mode, or
// "" for host (no policy applies).
func networkLabel(spec *envd.Spec) string {
	if spec.Network == envd.NetworkHost {
		return ""
	}
	if spec.Network == "" {
		return envd.NetworkProxy
	}
	return spec.Network
}

// resourcesFor sets requests equal to limits, so sandboxes are Guaranteed
// when both CPU and memory are given. The pids limit has no pod field; it
// is the kubelet's --pod-max-pids.
func resourcesFor(r envd.Resources) corev1.ResourceRequirements {
	rl := corev1.ResourceList{}
	if r.CPU != "" {
		rl[corev1.ResourceCPU] = resource.MustParse(r.CPU)
	}
	if r.Memory != "" {
		rl[corev1.ResourceMemory] = resource.MustParse(r.Memory)
	}
	if len(rl) == 0 {
		return corev1.ResourceRequirements{}
	}
	return corev1.ResourceRequirements{Limits: rl, Requests: rl.DeepCopy()}
}

// validateResources reports bad quantities before MustParse sees them.
func validateResources(r envd.Resources) error {
	for name, v := range map[string]string{"cpu": r.CPU, "memory": r.Memory, "disk": r.Disk} {
		if v == "" {
			continue
		}
		if q, err := resource.ParseQuantity(v); err != nil || q.Sign() <= 0 {
			return envd.Errorf(envd.ErrBadRequest, "resources.%s %q: want a positive Kubernetes quantity", name, v)
		}
	}
	return nil
}

// podReady reports whether pod runs, has an IP and passes readiness.
func podReady(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" || pod.DeletionTimestamp != nil {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podDead reports whether pod can never become ready.
func podDead(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded || pod.DeletionTimestamp != nil
}
