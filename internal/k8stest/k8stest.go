// Package k8stest starts a real Kubernetes control plane for tests: etcd,
// kube-apiserver (RBAC authorization), kube-scheduler and kwok with one fake
// Ready node (deploy/testenv/kwok-node.yaml) whose pods get loopback IPs
// from 127.1.0.0/16 and whose kubelet endpoint answers pods/exec by
// running the command locally. The binaries come from $ORCHARD_K8S_BIN or
// ~/.cache/orchard-k8s/bin (deploy/testenv/README.md); without them tests
// skip, unless ORCHARD_K8S_TEST=1 asks for them, when they fail.
//
// One stack serves a whole test binary: call [Need] in each test and
// [Stop] from TestMain when the tests are done.
package k8stest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

// Stack is a running control plane.
type Stack struct {
	Dir        string // state directory of stack.sh
	Kubeconfig string // admin kubeconfig
	Config     *rest.Config
	Clientset  *kubernetes.Clientset
	// Root is the module root (deploy/testenv lives below it).
	Root string
	env  []string
}

var shared struct {
	once  sync.Once
	stack *Stack
	skip  string
	err   error
}

// BinDir is where build-bins.sh put the binaries.
func BinDir() string {
	if d := os.Getenv("ORCHARD_K8S_BIN"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "orchard-k8s", "bin")
}

// Need returns the shared stack, starting it on first use, or skips the
// test when the binaries are absent (fails when ORCHARD_K8S_TEST=1).
func Need(t testing.TB) *Stack {
	t.Helper()
	shared.once.Do(start)
	if shared.skip != "" {
		if os.Getenv("ORCHARD_K8S_TEST") == "1" {
			t.Fatalf("ORCHARD_K8S_TEST=1 but %s", shared.skip)
		}
		t.Skip(shared.skip)
	}
	if shared.err != nil {
		t.Fatalf("start control plane: %v", shared.err)
	}
	return shared.stack
}

// FreePort returns a free loopback TCP port.
func FreePort() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "0"
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// moduleRoot finds the directory holding go.mod above the working one.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = up
	}
}

func start() {
	bin := BinDir()
	for _, b := range []string{"etcd", "kube-apiserver", "kube-scheduler", "kwok", "kwok-stages.yaml"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			shared.skip = fmt.Sprintf("Kubernetes test binaries not in %s (build: deploy/testenv/build-bins.sh %s)", bin, bin)
			return
		}
	}
	shared.stack, shared.err = startStack(bin)
}

func startStack(bin string) (*Stack, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	s := &Stack{Root: root}
	if s.Dir, err = os.MkdirTemp("", "orchard-k8s-stack-"); err != nil {
		return nil, err
	}
	s.env = append(os.Environ(), "BIN="+bin, "ST="+s.Dir, "AUTHZ=RBAC",
		"ETCD_PORT="+FreePort(), "ETCD_PEER_PORT="+FreePort(), "KAS_PORT="+FreePort(),
		"KWOK_CIDR=127.1.0.0/16", "KWOK_PORT="+FreePort())
	shared.stack = s // so that Stop cleans up after a failed start
	if out, err := s.script("up").CombinedOutput(); err != nil {
		return s, fmt.Errorf("stack.sh up: %w: %s", err, out)
	}
	s.Kubeconfig = filepath.Join(s.Dir, "kubeconfig")
	if s.Config, err = clientcmd.BuildConfigFromFlags("", s.Kubeconfig); err != nil {
		return s, err
	}
	s.Config.QPS, s.Config.Burst = 500, 1000
	if s.Clientset, err = kubernetes.NewForConfig(s.Config); err != nil {
		return s, err
	}
	return s, s.addNode()
}

func (s *Stack) script(verb string) *exec.Cmd {
	cmd := exec.Command("bash", filepath.Join(s.Root, "deploy/testenv/stack.sh"), verb)
	cmd.Env = s.env
	return cmd
}

// Stop stops the shared stack, if one was started.
func Stop() {
	s := shared.stack
	if s == nil || s.Dir == "" {
		return
	}
	_ = s.script("down").Run()
	_ = os.RemoveAll(s.Dir)
}

// addNode registers the fake kwok node from deploy/testenv/kwok-node.yaml.
func (s *Stack) addNode() error {
	data, err := os.ReadFile(filepath.Join(s.Root, "deploy/testenv/kwok-node.yaml"))
	if err != nil {
		return err
	}
	var node corev1.Node
	if err := yaml.Unmarshal(data, &node); err != nil {
		return err
	}
	_, err = s.Clientset.CoreV1().Nodes().Create(context.Background(), &node, metav1.CreateOptions{})
	return err
}

// Namespace creates a fresh namespace for one test.
func (s *Stack) Namespace(t testing.TB) string {
	t.Helper()
	ns := fmt.Sprintf("t-%d", time.Now().UnixNano()%1e9)
	if _, err := s.Clientset.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return ns
}
