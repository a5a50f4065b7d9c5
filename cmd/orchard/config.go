package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/orchard-rl/orchard/internal/cliconf"
	"github.com/orchard-rl/orchard/proxy"
)

// proxyConfig is the configuration of `orchard proxy`. Each field is a
// flag, and so also an environment variable and a --config file key
// (settings.go): precedence is flags > environment > file > defaults.
// Secrets have no file key.
type proxyConfig struct {
	Listen            string        // address to serve on; env ORCHARD_LISTEN; default 127.0.0.1:8080
	Upstream          string        // OpenAI-style base URL; env ORCHARD_UPSTREAM; default http://127.0.0.1:8000/v1
	AnthropicUpstream string        // base URL for /v1/messages; env ORCHARD_ANTHROPIC_UPSTREAM; default Upstream
	UpstreamKey       string        // upstream credential; env ORCHARD_UPSTREAM_API_KEY; no file key
	UpstreamKeyEnv    string        // env variable holding UpstreamKey, for config files; env ORCHARD_UPSTREAM_KEY_ENV
	UpstreamKind      string        // auto|vllm|sglang|openai|anthropic; env ORCHARD_UPSTREAM_KIND; default auto
	Data              string        // embedded store directory; env ORCHARD_DATA; default ./orchard-data
	Redis             string        // Redis URL; env ORCHARD_REDIS_URL; overrides Data
	IdleTimeout       time.Duration // upstream idle limit; env ORCHARD_IDLE_TIMEOUT; default 10m
	MaxBody           int64         // request body limit in bytes; env ORCHARD_MAX_BODY; default 256 MiB
	Routes            []routeConfig // model name -> upstream; env ORCHARD_ROUTES (JSON); usually a file list

	Auth        string        // none|required; env ORCHARD_AUTH; default none
	TokenSecret string        // HMAC secret of episode tokens, shared by replicas; env ORCHARD_TOKEN_SECRET; no file key
	AdminToken  string        // bearer token for /orchard/v1/*; env ORCHARD_ADMIN_TOKEN; no file key
	PublicURL   string        // base URL sandboxes reach the proxy at; env ORCHARD_PUBLIC_URL
	TokenTTL    time.Duration // episode token lifetime; env ORCHARD_TOKEN_TTL; default 24h
	Retention   time.Duration // finished episodes are deleted this long after finishing; 0 keeps them
	PprofListen string        // address for net/http/pprof; "" disables it; env ORCHARD_PPROF
	LiveLineage bool          // classify each call's lineage as it is recorded; env ORCHARD_LIVE_LINEAGE

	DedupMemory   int // bytes of dedup state the store keeps in memory; env ORCHARD_DEDUP_MEMORY; default 64 MiB
	DedupEpisodes int // most episodes that keep dedup state in memory; env ORCHARD_DEDUP_EPISODES; default 1024

	serverLimits // spill dir and connection limits (proxy_limits.go)
}

// routeConfig sends one model's calls to another upstream.
type routeConfig struct {
	Model    string `json:"model"`
	Upstream string `json:"upstream"`
	Kind     string `json:"kind,omitempty"`
	// KeyEnv names the environment variable holding this upstream's key,
	// so that keys stay out of config files.
	KeyEnv string `json:"key_env,omitempty"`
}

// routesValue is the --routes flag: a JSON list of routes, which a config
// file writes as a YAML list. Unknown fields are an error.
type routesValue struct{ routes *[]routeConfig }

func (v routesValue) Type() string { return "routes" }

func (v routesValue) String() string {
	if v.routes == nil || len(*v.routes) == 0 {
		return ""
	}
	b, _ := json.Marshal(*v.routes)
	return string(b)
}

func (v routesValue) Set(s string) error {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	var rs []routeConfig
	if err := dec.Decode(&rs); err != nil {
		return fmt.Errorf("want a JSON list of {model, upstream, kind, key_env}: %w", err)
	}
	*v.routes = rs
	return nil
}

func (c *proxyConfig) register(fs *pflag.FlagSet) {
	fs.StringVar(&c.Listen, "listen", "127.0.0.1:8080", "address to serve on")
	fs.StringVar(&c.Upstream, "upstream", "http://127.0.0.1:8000/v1", "upstream base URL including its version path, e.g. http://127.0.0.1:8000/v1: a call for /v1/chat/completions goes to it + /chat/completions")
	fs.StringVar(&c.AnthropicUpstream, "anthropic-upstream", "", "base URL for /v1/messages* including its version path, e.g. https://api.anthropic.com/v1 (default: --upstream)")
	fs.StringVar(&c.UpstreamKey, "upstream-key", "", "credential sent upstream instead of the client's")
	fs.StringVar(&c.UpstreamKeyEnv, "upstream-key-env", "", "name of the env variable holding --upstream-key, so that config files need not hold the key")
	fs.StringVar(&c.UpstreamKind, "upstream-kind", "auto", "upstream type: auto (ask the server), vllm, sglang, openai or anthropic")
	fs.StringVar(&c.Data, "data", "./orchard-data", "embedded store directory")
	fs.StringVar(&c.Redis, "redis", "", "Redis URL; overrides --data")
	fs.DurationVar(&c.IdleTimeout, "idle-timeout", 10*time.Minute, "abandon an upstream exchange after this long without a byte")
	fs.Int64Var(&c.MaxBody, "max-body", 256<<20, "largest request body accepted, in bytes")
	fs.Var(routesValue{&c.Routes}, "routes", `send some models to other upstreams: a JSON list of {"model", "upstream", "kind", "key_env"} (a YAML list in --config)`)
	fs.StringVar(&c.Auth, "auth", "none", "none, or required: inference routes need an episode token and /orchard/v1 the admin token")
	fs.StringVar(&c.TokenSecret, "token-secret", "", "secret that signs episode tokens, the same on every replica")
	fs.StringVar(&c.AdminToken, "admin-token", "", "bearer token required on /orchard/v1/*")
	fs.StringVar(&c.PublicURL, "public-url", "", "base URL sandboxes reach the proxy at, for the env of new episodes (default: the Host of the request)")
	fs.DurationVar(&c.TokenTTL, "token-ttl", 24*time.Hour, "lifetime of episode tokens")
	fs.DurationVar(&c.Retention, "retention", 0, "delete finished episodes this long after they finish, e.g. 168h (0: keep)")
	fs.StringVar(&c.PprofListen, "pprof", "", "serve net/http/pprof on this address (e.g. 127.0.0.1:6060) for profiling; off by default")
	fs.BoolVar(&c.LiveLineage, "live-lineage", false, "classify each call's lineage (extend, retry, fork, ...) as it is recorded, for the orchard_proxy_lineage_total metric; readers classify stored episodes either way")
	fs.IntVar(&c.DedupMemory, "dedup-memory", 64<<20, "bytes of memory the store's dedup state may take: one encoder per recent episode, "+
		"so that a call stores only what it adds to the episode's earlier calls; past it the least recently written episodes' state goes, "+
		"and is rebuilt from their stored calls if they go on")
	fs.IntVar(&c.DedupEpisodes, "dedup-episodes", 1024, "most episodes that keep dedup state in memory; keep it above the number of "+
		"episodes that run at once (a rollout's parallel agents), or their calls rebuild it from the stored calls again and again; "+
		"an episode that goes this many writes without a call keeps only its latest call's state")
	c.serverLimits.register(fs)
	cliconf.SetEnv(fs, "upstream-key", "ORCHARD_UPSTREAM_API_KEY")
	cliconf.SetEnv(fs, "redis", "ORCHARD_REDIS_URL")
	for _, secret := range []string{"upstream-key", "token-secret", "admin-token"} {
		cliconf.EnvOnly(fs, secret)
	}
}

// validate checks the settings that depend on each other.
func (c *proxyConfig) validate() error {
	switch c.Auth {
	case "none", "":
	case "required":
		if c.AdminToken == "" {
			return errors.New("--auth required needs --admin-token (or ORCHARD_ADMIN_TOKEN) for the episode API")
		}
		if len(c.TokenSecret) < 16 {
			return errors.New("--auth required needs --token-secret (or ORCHARD_TOKEN_SECRET) of at least 16 bytes, the same on every replica")
		}
	default:
		return fmt.Errorf("--auth %q: want none or required", c.Auth)
	}
	if c.TokenSecret != "" && len(c.TokenSecret) < 16 {
		return errors.New("--token-secret must be at least 16 bytes")
	}
	if c.MaxBody <= 0 || c.IdleTimeout <= 0 {
		return errors.New("--max-body and --idle-timeout must be positive")
	}
	if c.DedupMemory < 0 || c.DedupEpisodes < 0 {
		return errors.New("--dedup-memory and --dedup-episodes must not be negative")
	}
	return c.serverLimits.validate()
}

// upstreams builds the proxy's upstream set from the config.
func (c *proxyConfig) upstreams() (def, anth *proxy.Upstream, routes map[string]*proxy.Upstream, err error) {
	key := c.upstreamKey()
	def, err = newUpstream("--upstream", c.Upstream, key, c.UpstreamKind)
	if err != nil {
		return nil, nil, nil, err
	}
	anth = def
	if c.AnthropicUpstream != "" {
		if anth, err = newUpstream("--anthropic-upstream", c.AnthropicUpstream, key, c.UpstreamKind); err != nil {
			return nil, nil, nil, err
		}
	}
	routes = make(map[string]*proxy.Upstream, len(c.Routes))
	for i, r := range c.Routes {
		if r.Model == "" {
			return nil, nil, nil, fmt.Errorf("config routes[%d]: model is required", i)
		}
		rkey := key
		if r.KeyEnv != "" {
			rkey, _ = lookupEnv(r.KeyEnv)
		}
		kind := r.Kind
		if kind == "" {
			kind = c.UpstreamKind
		}
		up, err := newUpstream(fmt.Sprintf("config routes[%d] (%s)", i, r.Model), r.Upstream, rkey, kind)
		if err != nil {
			return nil, nil, nil, err
		}
		routes[r.Model] = up
	}
	return def, anth, routes, nil
}

// upstreamKey is --upstream-key, else the variable --upstream-key-env names.
func (c *proxyConfig) upstreamKey() string {
	if c.UpstreamKey == "" && c.UpstreamKeyEnv != "" {
		v, _ := lookupEnv(c.UpstreamKeyEnv)
		return v
	}
	return c.UpstreamKey
}

func newUpstream(what, raw, key, kind string) (*proxy.Upstream, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s %q: want an http(s) base URL such as http://127.0.0.1:8000/v1", what, raw)
	}
	var k proxy.UpstreamKind // a config built in code may leave it unset: openai
	if kind != "" {
		if k, err = proxy.ParseUpstreamKind(kind); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	return &proxy.Upstream{BaseURL: u, Key: key, Kind: k}, nil
}
