package redistest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// clusterTimeout bounds creating a cluster and waiting for it to be ok.
const clusterTimeout = 30 * time.Second

// Cluster is a Redis Cluster of three masters and no replicas. Nodes[i] can
// be stopped and started like any [Server]; a restarted node keeps its
// nodes.conf and rejoins.
type Cluster struct {
	Nodes []*Server
}

// NewCluster starts three cluster-enabled servers, creates a cluster of them
// with `redis-cli --cluster create`, and waits until every node reports
// cluster_state:ok with all 16384 slots assigned.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	if _, err := exec.LookPath(cliBin); err != nil {
		t.Fatalf("redistest: %s not installed: %v", cliBin, err)
	}
	c := &Cluster{}
	for range 3 {
		bus, err := freePort()
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		c.Nodes = append(c.Nodes, newServer(t,
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-port", strconv.Itoa(bus), "--cluster-node-timeout", "5000"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	args := []string{"--cluster", "create"}
	for _, n := range c.Nodes {
		args = append(args, n.Addr())
	}
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cliBin, args...).CombinedOutput(); err != nil {
		t.Fatalf("redistest: %s %s: %v\n%s", cliBin, strings.Join(args, " "), err, out)
	}
	if err := c.WaitOK(); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return c
}

// Addrs returns the nodes' host:port addresses.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr()
	}
	return out
}

// URL returns redis+cluster://host1:port1,host2:port2,host3:port3.
func (c *Cluster) URL() string { return "redis+cluster://" + strings.Join(c.Addrs(), ",") }

// WaitOK polls CLUSTER INFO on every node until each reports cluster_state:ok
// and 16384 assigned slots, for at most 30 s. Use it after restarting nodes.
func (c *Cluster) WaitOK() error {
	deadline := time.Now().Add(clusterTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		bad := ""
		for _, n := range c.Nodes {
			info, err := do(n.Addr(), time.Second, "CLUSTER", "INFO")
			if err != nil || !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_slots_assigned:16384") {
				bad = fmt.Sprintf("node %s: %v %q", n.Addr(), err, firstLine(info))
				break
			}
		}
		if bad == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster not ok within %v: %s", clusterTimeout, bad)
		}
		<-tick.C
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return strings.TrimSpace(line)
}

// ClusterURL returns REDIS_CLUSTER_URL when it is set and otherwise starts a
// cluster for t and returns its URL.
func ClusterURL(t testing.TB) string {
	t.Helper()
	if u := os.Getenv("REDIS_CLUSTER_URL"); u != "" {
		return u
	}
	return NewCluster(t).URL()
}
