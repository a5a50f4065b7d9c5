package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/orchard-rl/orchard/envd"
)

// Options configures a [Backend]. Zero fields take the documented defaults.
type Options struct {
	// StateDir holds one directory per sandbox (its work dir, agent socket
	// and log); default $TMPDIR/orchard-envd. Sandboxes never see it.
	StateDir string
	// Bwrap is the bubblewrap binary; default "bwrap" from PATH.
	Bwrap string
	// AgentPath is the binary run as the sandbox agent; default
	// "orchard-agent" next to this executable when it exists (smaller and
	// faster to start), else this executable. It is bind-mounted read-only
	// at /.orchard/agent.
	AgentPath string
	// AgentArgs come before the agent flags; default ["sandbox-agent"]
	// (which orchard-agent accepts too).
	AgentArgs []string
	// AgentEnv is extra KEY=VALUE env of the agent process (and so of
	// every command).
	AgentEnv []string
	// Network is the mode of specs that give none (the envd Manager
	// always gives one): "proxy", "none" or "host"; default "proxy".
	Network string
	// SandboxUID and SandboxGID are the user every sandbox process runs
	// as, on the host and inside; default 65534 (nobody). When envd runs
	// as root, bubblewrap is started as this user, so that a sandbox
	// process is an unprivileged user on the host too; otherwise it runs
	// as envd's user, mapped to this id inside.
	SandboxUID, SandboxGID int
	// NoUserNS disables the user namespace (it is used when the kernel
	// allows one; capabilities are dropped either way). Without one,
	// bubblewrap runs as envd's user.
	NoUserNS bool
	// Defaults fill the resources a spec leaves empty; default cpu 2,
	// memory 4Gi, pids 1024, disk 4Gi.
	Defaults envd.Resources
	// CgroupParent names the parent cgroup of the sandboxes' cgroups,
	// created under envd's own cgroup; default "orchard-envd". "-"
	// disables cgroups.
	CgroupParent string
	// Hide lists extra host paths replaced by an empty tmpfs inside
	// sandboxes (the state dir always is).
	Hide []string
	// StartTimeout bounds how long Create waits for the agent; default
	// 30 s.
	StartTimeout time.Duration
	Logger       *slog.Logger // nil discards
}

// Backend runs each sandbox as a bubblewrap jail: a read-only minimal
// root (the host's system directories and a filtered /etc, or an image),
// a size-limited tmpfs work directory, fresh /tmp, /dev and /proc, its
// own PID, IPC, UTS, user and (except in network mode host) network
// namespaces, an unprivileged user, no capabilities, no_new_privs, and
// cgroup limits. It implements envd.Backend and is safe for concurrent
// use.
type Backend struct {
	opts      Options
	cg        *cgroups // nil when disabled
	userNS    bool
	setuid    bool     // bubblewrap starts as SandboxUID (envd is root)
	hostRoot  []string // bubblewrap arguments of the minimal host root
	agentPath string   // the agent binary, installed in the state dir
	images    *imageCache

	mu    sync.Mutex // guards following
	boxes map[string]*box
	// creating holds the ids of sandboxes being created: their directories
	// exist before they are in boxes, and a concurrent Sweep (envd's start
	// runs one while it already serves) must not take them for orphans.
	creating map[string]bool
}

// box is one running jail.
type box struct {
	dir    string
	egress *egressServer // nil unless network mode proxy with an episode
	cmd    *exec.Cmd
	done   chan struct{} // closed when the jail process has exited
	cg     *cgroup
	tr     *http.Transport
}

// New checks that bubblewrap runs and prepares the state directory and
// cgroups. Unusable cgroups are not an error: they are logged once and
// reported as a warning on each sandbox that asks for limits.
func New(opts Options) (*Backend, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	b := &Backend{opts: opts, boxes: map[string]*box{}, creating: map[string]bool{},
		hostRoot: hostRootArgs("/", filepath.Join(opts.StateDir, "etc")), agentPath: filepath.Join(opts.StateDir, "agent")}
	if err := b.prepareStateDir(); err != nil {
		return nil, err
	}
	if out, err := exec.Command(opts.Bwrap, "--ro-bind", "/", "/", "true").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("bubblewrap %s does not run (install the bubblewrap package): %w: %s", opts.Bwrap, err, out)
	}
	if err := b.probeUserNS(); err != nil {
		return nil, err
	}
	b.images = newImageCache(filepath.Join(opts.StateDir, "images"))
	if opts.CgroupParent != "-" {
		b.cg = detectCgroups(opts.CgroupParent)
		if b.cg.warning != "" {
			opts.Logger.Warn("cgroup limits degraded", "reason", b.cg.warning)
		}
	}
	return b, nil
}

func (o *Options) defaults() error {
	if o.StateDir == "" {
		o.StateDir = filepath.Join(os.TempDir(), "orchard-envd")
	}
	abs, err := filepath.Abs(o.StateDir)
	if err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	o.StateDir = abs
	if o.Bwrap == "" {
		o.Bwrap = "bwrap"
	}
	if p, err := exec.LookPath(o.Bwrap); err != nil {
		return fmt.Errorf("find bubblewrap (install the bubblewrap package): %w", err)
	} else {
		o.Bwrap = p
	}
	if o.AgentPath == "" {
		if o.AgentPath, err = os.Executable(); err != nil {
			return fmt.Errorf("find agent binary: %w", err)
		}
		if small := filepath.Join(filepath.Dir(o.AgentPath), "orchard-agent"); isExecutable(small) {
			o.AgentPath = small
		}
	}
	if o.AgentArgs == nil {
		o.AgentArgs = []string{"sandbox-agent"}
	}
	if o.Network == "" {
		o.Network = envd.NetworkProxy
	}
	if o.Network != envd.NetworkProxy && o.Network != envd.NetworkHost && o.Network != envd.NetworkNone {
		return fmt.Errorf("network %q: want proxy, none or host", o.Network)
	}
	if o.SandboxUID == 0 && o.SandboxGID == 0 {
		o.SandboxUID, o.SandboxGID = 65534, 65534
	}
	if o.Defaults == (envd.Resources{}) {
		o.Defaults = DefaultResources
	}
	if o.CgroupParent == "" {
		o.CgroupParent = "orchard-envd"
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// DefaultResources are the limits of a sandbox whose spec gives none.
var DefaultResources = envd.Resources{CPU: "2", Memory: "4Gi", PIDs: 1024, Disk: "4Gi"}

// prepareStateDir creates the state dir (searchable, not listable, by
// the sandbox user when bubblewrap runs as that user) and installs the
// agent binary in it.
func (b *Backend) prepareStateDir() error {
	for _, d := range []string{b.opts.StateDir, filepath.Join(b.opts.StateDir, "s")} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return fmt.Errorf("create state dir: %w", err)
		}
		if err := os.Chmod(d, 0o711); err != nil {
			return fmt.Errorf("create state dir: %w", err)
		}
	}
	if err := mirrorEtc("/etc", filepath.Join(b.opts.StateDir, "etc")); err != nil {
		return fmt.Errorf("filtered /etc for sandboxes: %w", err)
	}
	return installAgent(b.opts.AgentPath, b.agentPath)
}

// probeUserNS decides how jails get their unprivileged user: started as
// SandboxUID in a user namespace when envd is root, else in a user
// namespace mapping envd's user, else (NoUserNS, or no user namespaces)
// without one.
func (b *Backend) probeUserNS() error {
	if b.opts.NoUserNS {
		b.opts.Logger.Warn("no user namespace (--no-userns): sandboxes run as envd's user, capabilities dropped")
		return nil
	}
	b.setuid = os.Geteuid() == 0
	if b.setuid {
		if err := checkTraversable(b.opts.StateDir); err != nil {
			return err
		}
	}
	cmd := exec.Command(b.opts.Bwrap, "--unshare-user", "--ro-bind", "/", "/", "true")
	cmd.SysProcAttr = b.procAttr()
	out, err := cmd.CombinedOutput()
	if err != nil && b.setuid {
		return fmt.Errorf("bubblewrap as uid %d with a user namespace: %w: %s", b.opts.SandboxUID, err, out)
	}
	b.userNS = err == nil
	if !b.userNS {
		b.opts.Logger.Warn("user namespaces unavailable; sandboxes run as envd's user without one (capabilities are still dropped)")
	}
	return nil
}

// procAttr is how bubblewrap is started: in its own process group, killed
// with envd, and as the sandbox user when envd is root.
func (b *Backend) procAttr() *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
	killWithParent(a)
	if b.setuid {
		a.Credential = &syscall.Credential{Uid: uint32(b.opts.SandboxUID), Gid: uint32(b.opts.SandboxGID), Groups: []uint32{}}
	}
	return a
}

// meta is written to each sandbox directory so a later envd can find and
// kill what an earlier one left running.
type meta struct {
	ID        string `json:"id"`
	PID       int    `json:"pid"`
	StartTime string `json:"start_time"` // field 22 of /proc/PID/stat
}

// Create starts the jail and waits until its agent answers.
func (b *Backend) Create(ctx context.Context, id string, spec *envd.Spec) (*envd.Instance, error) {
	if spec.Network == "" {
		spec.Network = b.opts.Network
	}
	res := b.withDefaults(spec.Resources)
	lim, err := parseLimits(res)
	if err != nil {
		return nil, err
	}
	disk, err := parseDisk(res.Disk)
	if err != nil {
		return nil, err
	}
	root, err := b.images.root(ctx, spec.Image)
	if err != nil {
		return nil, err
	}
	bx := &box{dir: filepath.Join(b.opts.StateDir, "s", id), done: make(chan struct{})}
	b.mu.Lock()
	b.creating[id] = true
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.creating, id)
		b.mu.Unlock()
	}()
	if err := os.Mkdir(bx.dir, 0o711); err != nil {
		return nil, fmt.Errorf("create sandbox dir: %w", err)
	}
	if err := b.serveEgress(spec, bx); err != nil {
		b.teardown(bx)
		return nil, err
	}
	warns, err := b.start(ctx, id, spec, jailSpec{root: root, disk: disk, lim: lim}, bx)
	if err != nil {
		b.teardown(bx)
		return nil, err
	}
	b.mu.Lock()
	b.boxes[id] = bx
	b.mu.Unlock()
	return &envd.Instance{BaseURL: "http://sandbox", Transport: bx.tr, Workdir: spec.Workdir, Warnings: warns,
		EgressBridged: spec.Egress != nil}, nil
}

// jailSpec is what Create resolved for start: the root filesystem ("" is
// the minimal host root), the work dir's size and the cgroup limits.
type jailSpec struct {
	root string
	disk int64
	lim  limits
}

// withDefaults fills the fields r leaves empty from the backend defaults.
func (b *Backend) withDefaults(r envd.Resources) envd.Resources {
	d := b.opts.Defaults
	if r.CPU == "" {
		r.CPU = d.CPU
	}
	if r.Memory == "" {
		r.Memory = d.Memory
	}
	if r.PIDs == 0 {
		r.PIDs = d.PIDs
	}
	if r.Disk == "" {
		r.Disk = d.Disk
	}
	return r
}

// parseDisk reads the work dir size; it must be at least 1 MiB.
func parseDisk(s string) (int64, error) {
	v, err := parseQuantity(s)
	if err != nil || v < 1<<20 {
		return 0, envd.Errorf(envd.ErrBadRequest, "resources.disk %q: want a size of at least 1Mi, like \"4Gi\"", s)
	}
	return v, nil
}

// start launches bubblewrap for bx and waits for the agent.
func (b *Backend) start(ctx context.Context, id string, spec *envd.Spec, js jailSpec, bx *box) ([]string, error) {
	lim := js.lim
	sock := filepath.Join(bx.dir, "a.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on agent socket: %w", err)
	}
	ln.SetUnlinkOnClose(false)
	lnFile, err := ln.File()
	ln.Close() // the jail holds the dup; the socket file stays
	if err != nil {
		return nil, fmt.Errorf("agent socket fd: %w", err)
	}
	defer lnFile.Close()
	var warns []string
	if b.cg != nil {
		if bx.cg, warns, err = b.cg.create(id, lim); err != nil {
			return nil, err
		}
	} else if lim.any() {
		warns = append(warns, "cgroups disabled (--cgroup-parent -); resource limits are not enforced")
	}
	logf, err := os.Create(filepath.Join(bx.dir, "agent.log"))
	if err != nil {
		return nil, fmt.Errorf("agent log: %w", err)
	}
	defer logf.Close()
	held, gate, err := b.command(bx, b.bwrapArgs(spec, js.root, bx.dir, js.disk), lnFile, logf)
	if err != nil {
		return nil, err
	}
	err = bx.cmd.Start()
	if gate != nil {
		defer gate.Close()
		held.Close() // the jail has its own copy
	}
	if err != nil {
		return nil, fmt.Errorf("start bubblewrap: %w", err)
	}
	go func() { _ = bx.cmd.Wait(); close(bx.done) }()
	if err := b.writeMeta(id, bx); err != nil {
		return nil, err
	}
	if gate != nil {
		if err := bx.cg.add(bx.cmd.Process.Pid); err != nil {
			return nil, err
		}
		if _, err := gate.Write([]byte("\n")); err != nil {
			return nil, fmt.Errorf("release jail: %w", err)
		}
	}
	bx.tr = unixTransport(sock)
	if err := b.waitReady(ctx, bx); err != nil {
		return warns, err
	}
	return warns, nil
}

// gateScript holds bubblewrap back until envd has put its process into the
// sandbox's cgroups: it waits for a line on fd 4, closes it and becomes
// bubblewrap (the same pid). Everything bubblewrap then creates is born
// inside the cgroups, so no process of the sandbox ever runs outside them,
// and its cgroup namespace is rooted at its own cgroup: the sandbox sees
// "/" there, never a path of the host's.
const gateScript = `read -r _ <&4 || exit 111; exec 4<&-; exec "$0" "$@"`

// command sets bx.cmd to bubblewrap with args, the agent's listening
// socket as fd 3 and log as its output. When bx has cgroups it runs
// through gateScript, and command returns the gate's two ends: the read
// end the jail inherits (to close once it started) and the write end
// that releases it.
func (b *Backend) command(bx *box, args []string, ln, log *os.File) (held, gate *os.File, err error) {
	bx.cmd = exec.Command(b.opts.Bwrap, args...)
	bx.cmd.ExtraFiles = []*os.File{ln}
	if bx.cg != nil {
		if held, gate, err = os.Pipe(); err != nil {
			return nil, nil, fmt.Errorf("cgroup gate pipe: %w", err)
		}
		bx.cmd = exec.Command("/bin/sh", append([]string{"-c", gateScript, b.opts.Bwrap}, args...)...)
		bx.cmd.ExtraFiles = []*os.File{ln, held}
	}
	bx.cmd.Stdout, bx.cmd.Stderr = log, log
	bx.cmd.SysProcAttr = b.procAttr()
	return held, gate, nil
}

// waitReady polls the agent's health route over its socket. Connections
// queue on the socket envd created, so the first call succeeds as soon as
// the agent accepts; it fails fast if the jail exits.
func (b *Backend) waitReady(ctx context.Context, bx *box) error {
	ctx, cancel := context.WithTimeout(ctx, b.opts.StartTimeout)
	defer cancel()
	ctx, cancelDone := context.WithCancelCause(ctx)
	defer cancelDone(nil)
	go func() { // ends when waitReady returns, at the latest

		select {
		case <-bx.done:
			cancelDone(errors.New("sandbox exited during start"))
		case <-ctx.Done():
		}
	}()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://sandbox/agent/v1/health", nil)
	res, err := bx.tr.RoundTrip(req)
	if err == nil {
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode == http.StatusOK {
			return nil
		}
		err = fmt.Errorf("agent health: HTTP %d", res.StatusCode)
	}
	if cause := context.Cause(ctx); cause != nil {
		err = cause
	}
	return fmt.Errorf("start sandbox: %w; jail log: %s", err, b.logTail(bx))
}

// logTail returns the end of the sandbox's agent log.
func (b *Backend) logTail(bx *box) string {
	data, _ := os.ReadFile(filepath.Join(bx.dir, "agent.log"))
	if len(data) > 2048 {
		data = data[len(data)-2048:]
	}
	return strings.TrimSpace(string(data))
}

func (b *Backend) writeMeta(id string, bx *box) error {
	pid := bx.cmd.Process.Pid
	m := meta{ID: id, PID: pid, StartTime: startTime(pid)}
	data, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(bx.dir, "meta.json"), data, 0o600); err != nil {
		return fmt.Errorf("write sandbox meta: %w", err)
	}
	return nil
}

// unixTransport dials the agent socket at path for every connection.
func unixTransport(path string) *http.Transport {
	return &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
		MaxIdleConnsPerHost: 32,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
}

// isExecutable reports whether p is a regular file with an execute bit.
func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}
