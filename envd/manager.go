package envd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httputil"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
)

// Backend runs sandboxes: the local bubblewrap jails or Kubernetes pods.
// Implementations are safe for concurrent use.
type Backend interface {
	// Create starts sandbox id for spec and returns once its agent
	// answers. On error nothing of the sandbox is left behind.
	Create(ctx context.Context, id string, spec *Spec) (*Instance, error)
	// Delete kills every process of sandbox id and removes its state;
	// an unknown id is not an error.
	Delete(ctx context.Context, id string) error
	// Sweep removes sandboxes this backend created earlier (for example
	// before envd crashed) whose id keep rejects, and reports how many.
	Sweep(ctx context.Context, keep func(id string) bool) (int, error)
}

// Instance is how envd reaches a created sandbox's agent.
type Instance struct {
	// BaseURL is the agent's base URL, e.g. "http://127.1.0.7:7070".
	BaseURL string
	// Transport carries requests to the agent (a Unix-socket dialer on
	// the local backend, a pooled HTTP/2 transport on Kubernetes).
	Transport http.RoundTripper
	// Token is sent to the agent as a bearer token when set.
	Token string
	// Workdir is the sandbox's work directory as the agent sees it.
	Workdir string
	// Warnings lists limits the backend could not enforce.
	Warnings []string
	// EgressBridged reports that the backend serves [Spec.Egress] inside
	// the sandbox at http://127.0.0.1:Port, so the episode's base URLs
	// are rewritten to that address.
	EgressBridged bool
}

// EpisodeAPI is the part of the proxy's episode API envd calls;
// [*EpisodeClient] implements it.
type EpisodeAPI interface {
	Create(ctx context.Context, spec EpisodeSpec) (*Episode, error)
	Finish(ctx context.Context, id string, o Outcome) (json.RawMessage, error)
}

// Options configures a [Manager]. Zero durations take the defaults.
type Options struct {
	Backend     Backend // required
	BackendName string  // reported in [Sandbox].Backend
	// Episodes opens and finishes episodes; nil rejects specs with an
	// episode.
	Episodes EpisodeAPI
	// DefaultTTL is a sandbox's lifetime when its spec gives none;
	// default 1 h. MaxTTL caps spec TTLs; default 24 h.
	DefaultTTL, MaxTTL time.Duration
	// IdleTimeout reaps sandboxes without requests for this long;
	// default 15 min. ReapInterval is how often the reaper looks;
	// default 5 s.
	IdleTimeout, ReapInterval time.Duration
	// MaxSandboxes caps live sandboxes; default 1024, negative means no
	// cap.
	MaxSandboxes int
	// Network is the mode of specs that give none; default
	// [NetworkProxy].
	Network string
	Logger  *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Manager owns the live sandboxes: it creates them through the backend,
// wires their episodes, forwards requests to their agents and reaps them
// on TTL and idleness. It is safe for concurrent use.
type Manager struct {
	opts Options

	mu        sync.Mutex // guards following
	sandboxes map[string]*sandbox
	pending   int // creations in flight, counted against MaxSandboxes
}

// sandbox is one live sandbox.
type sandbox struct {
	info    Sandbox
	env     map[string]string // spec env, then episode env on top
	idle    time.Duration
	forward *httputil.ReverseProxy

	mu       sync.Mutex // guards following
	lastUsed time.Time
	active   int
}

// NewManager returns a Manager; run [Manager.Start] to sweep orphans and
// reap expired sandboxes.
func NewManager(opts Options) *Manager {
	if opts.Backend == nil {
		panic("envd.NewManager: nil Backend")
	}
	opts.defaults()
	return &Manager{opts: opts, sandboxes: map[string]*sandbox{}}
}

// defaults fills the zero fields of o.
func (o *Options) defaults() {
	if o.DefaultTTL <= 0 {
		o.DefaultTTL = time.Hour
	}
	if o.MaxTTL <= 0 {
		o.MaxTTL = 24 * time.Hour
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 15 * time.Minute
	}
	if o.ReapInterval <= 0 {
		o.ReapInterval = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxSandboxes == 0 {
		o.MaxSandboxes = DefaultMaxSandboxes
	}
	if o.Network == "" {
		o.Network = NetworkProxy
	}
}

// validate checks a spec and fills its defaults.
func (m *Manager) validate(spec *Spec) error {
	if spec.Workdir == "" {
		spec.Workdir = "/work"
	}
	if err := checkWorkdir(spec.Workdir); err != nil {
		return err
	}
	spec.Workdir = path.Clean(spec.Workdir)
	if spec.Network == "" {
		spec.Network = m.opts.Network
	}
	spec.Egress = nil
	switch {
	case spec.TTL < 0 || spec.IdleTimeout < 0:
		return Errorf(ErrBadRequest, "ttl and idle_timeout must not be negative")
	case spec.TTL.D() > m.opts.MaxTTL:
		return Errorf(ErrBadRequest, "ttl %s exceeds the server's maximum %s", spec.TTL.D(), m.opts.MaxTTL)
	case spec.Network != NetworkProxy && spec.Network != NetworkNone && spec.Network != NetworkHost:
		return Errorf(ErrBadRequest, "network %q: want \"proxy\", \"none\" or \"host\"", spec.Network)
	case spec.Episode != nil && spec.Episode.TaskID == "":
		return Errorf(ErrBadRequest, "episode.task_id is required")
	case spec.Episode != nil && m.opts.Episodes == nil:
		return Errorf(ErrBadRequest, "this envd has no proxy configured (--proxy); cannot open an episode")
	case spec.Resources.PIDs < 0:
		return Errorf(ErrBadRequest, "resources.pids must not be negative")
	}
	if spec.TTL == 0 {
		spec.TTL = Duration(m.opts.DefaultTTL)
	}
	for k := range spec.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return Errorf(ErrBadRequest, "invalid env name %q", k)
		}
	}
	return nil
}

// admit reserves a slot for a new sandbox.
func (m *Manager) admit() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.opts.MaxSandboxes > 0 && len(m.sandboxes)+m.pending >= m.opts.MaxSandboxes {
		return Errorf(ErrUnavailable, "sandbox limit %d reached; delete sandboxes or retry later", m.opts.MaxSandboxes)
	}
	m.pending++
	return nil
}

// Create starts a sandbox, opening its episode first when spec has one.
func (m *Manager) Create(ctx context.Context, spec Spec) (Sandbox, error) {
	if err := m.validate(&spec); err != nil {
		return Sandbox{}, err
	}
	if err := m.admit(); err != nil {
		return Sandbox{}, err
	}
	defer func() { m.mu.Lock(); m.pending--; m.mu.Unlock() }()
	id := newID("sb-")
	env := maps.Clone(spec.Env)
	if env == nil {
		env = map[string]string{}
	}
	var ep *Episode
	if spec.Episode != nil {
		var err error
		if ep, err = m.opts.Episodes.Create(ctx, *spec.Episode); err != nil {
			return Sandbox{}, err
		}
		maps.Copy(env, ep.Env)
		env["ORCHARD_EPISODE_ID"] = ep.ID
	}
	base, err := m.egress(&spec, ep)
	if err == nil {
		var inst *Instance
		if inst, err = m.opts.Backend.Create(ctx, id, &spec); err == nil {
			return m.register(id, &spec, env, ep, inst, base), nil
		}
	}
	m.finishEpisode(ep, &Outcome{Status: "error", Info: map[string]any{"reason": "sandbox create failed", "error": err.Error()}})
	return Sandbox{}, err
}

// register records a created sandbox, pointing its episode's base URLs
// at the in-sandbox bridge when the backend runs one.
func (m *Manager) register(id string, spec *Spec, env map[string]string, ep *Episode, inst *Instance, base string) Sandbox {
	if inst.EgressBridged && spec.Egress != nil {
		rewriteBase(env, base, fmt.Sprintf("http://127.0.0.1:%d", spec.Egress.Port))
	}
	now := m.opts.Now()
	sb := &sandbox{env: env, idle: spec.IdleTimeout.D(), lastUsed: now, forward: newForwarder(inst, m.opts.Logger)}
	if sb.idle <= 0 {
		sb.idle = m.opts.IdleTimeout
	}
	sb.info = Sandbox{ID: id, Network: spec.Network, Backend: m.opts.BackendName, Image: spec.Image, Workdir: inst.Workdir,
		Labels: spec.Labels, CreatedAt: now, ExpiresAt: now.Add(spec.TTL.D()), Warnings: inst.Warnings}
	if ep != nil {
		sb.info.EpisodeID = ep.ID
	}
	m.mu.Lock()
	m.sandboxes[id] = sb
	m.mu.Unlock()
	m.opts.Logger.Info("sandbox created", "sandbox", id, "episode", sb.info.EpisodeID)
	return sb.snapshot()
}

// snapshot returns the sandbox's public description.
func (sb *sandbox) snapshot() Sandbox {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	s := sb.info
	s.LastUsed = sb.lastUsed
	return s
}

// Get returns sandbox id.
func (m *Manager) Get(id string) (Sandbox, error) {
	sb, err := m.lookup(id)
	if err != nil {
		return Sandbox{}, err
	}
	return sb.snapshot(), nil
}

// List returns the live sandboxes, oldest first.
func (m *Manager) List() []Sandbox {
	m.mu.Lock()
	all := slices.Collect(maps.Values(m.sandboxes))
	m.mu.Unlock()
	out := make([]Sandbox, 0, len(all))
	for _, sb := range all {
		out = append(out, sb.snapshot())
	}
	slices.SortFunc(out, func(a, b Sandbox) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out
}

func (m *Manager) lookup(id string) (*sandbox, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sb, ok := m.sandboxes[id]
	if !ok {
		return nil, Errorf(ErrNotFound, "no sandbox %q", id)
	}
	return sb, nil
}

// DeleteResult is the answer to a delete: the sandbox and, when it had an
// episode, the proxy's finished episode.
type DeleteResult struct {
	ID      string          `json:"id"`
	Deleted bool            `json:"deleted"`
	Episode json.RawMessage `json:"episode,omitempty"`
}

// Delete kills sandbox id and finishes its episode with o (nil means
// status "error": deleted without an outcome).
func (m *Manager) Delete(ctx context.Context, id string, o *Outcome) (DeleteResult, error) {
	m.mu.Lock()
	sb, ok := m.sandboxes[id]
	delete(m.sandboxes, id)
	m.mu.Unlock()
	if !ok {
		return DeleteResult{}, Errorf(ErrNotFound, "no sandbox %q", id)
	}
	res := DeleteResult{ID: id, Deleted: true}
	if err := m.opts.Backend.Delete(ctx, id); err != nil {
		res.Deleted = false
		m.opts.Logger.Warn("sandbox delete failed; the sweep will retry", "sandbox", id, "err", err)
	}
	if sb.info.EpisodeID != "" {
		if o == nil {
			o = &Outcome{Status: "error", Info: map[string]any{"reason": "sandbox deleted without an outcome"}}
		}
		ep, err := m.opts.Episodes.Finish(ctx, sb.info.EpisodeID, *o)
		if err != nil {
			return res, err
		}
		res.Episode = ep
	}
	m.opts.Logger.Info("sandbox deleted", "sandbox", id)
	return res, nil
}

// finishEpisode closes ep (if any) with o, logging a failure.
func (m *Manager) finishEpisode(ep *Episode, o *Outcome) {
	if ep == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := m.opts.Episodes.Finish(ctx, ep.ID, *o); err != nil {
		m.opts.Logger.Warn("finish episode failed", "episode", ep.ID, "err", err)
	}
}

// newID returns prefix plus 12 random hex digits.
func newID(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
