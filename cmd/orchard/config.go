package main

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/orchard-rl/orchard/proxy"
)

// proxyConfig is the configuration of `orchard proxy`. Precedence is
// flags > --config file > environment > defaults: flags are registered with
// their environment value as default, and file values are applied to every
// flag the command line did not set.
type proxyConfig struct {
	Listen            string        // address to serve on; env ORCHARD_LISTEN; default 127.0.0.1:8080
	Upstream          string        // OpenAI-style base URL; env ORCHARD_UPSTREAM; default http://127.0.0.1:8000/v1
	AnthropicUpstream string        // base URL for /v1/messages; env ORCHARD_ANTHROPIC_UPSTREAM; default Upstream
	UpstreamKey       string        // upstream credential; env ORCHARD_UPSTREAM_API_KEY
	UpstreamKind      string        // auto|vllm|sglang|openai|anthropic; env ORCHARD_UPSTREAM_KIND; default auto
	Data              string        // embedded store directory; env ORCHARD_DATA; default ./orchard-data
	Redis             string        // Redis URL; env ORCHARD_REDIS_URL; overrides Data
	IdleTimeout       time.Duration // upstream idle limit; env ORCHARD_IDLE_TIMEOUT; default 10m
	MaxBody           int64         // request body limit in bytes; default 256 MiB
	Routes            []routeConfig // model name -> upstream (file only)

	Auth        string        // none|required; env ORCHARD_AUTH; default none
	TokenSecret string        // HMAC secret of episode tokens, shared by replicas; env ORCHARD_TOKEN_SECRET
	AdminToken  string        // bearer token for /orchard/v1/*; env ORCHARD_ADMIN_TOKEN
	PublicURL   string        // base URL sandboxes reach the proxy at; env ORCHARD_PUBLIC_URL
	TokenTTL    time.Duration // episode token lifetime; default 24h
	Retention   time.Duration // finished episodes are deleted this long after finishing; 0 keeps them
	PprofListen string        // address for net/http/pprof; "" disables it

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

// fileConfig is the YAML form of --config. Unknown keys are an error.
type fileConfig struct {
	Listen            *string       `json:"listen"`
	Upstream          *string       `json:"upstream"`
	AnthropicUpstream *string       `json:"anthropic_upstream"`
	UpstreamKind      *string       `json:"upstream_kind"`
	UpstreamKeyEnv    *string       `json:"upstream_key_env"`
	Data              *string       `json:"data"`
	Redis             *string       `json:"redis"`
	IdleTimeout       *string       `json:"idle_timeout"`
	MaxBody           *int64        `json:"max_body"`
	Auth              *string       `json:"auth"`
	PublicURL         *string       `json:"public_url"`
	Retention         *string       `json:"retention"`
	TokenTTL          *string       `json:"token_ttl"`
	Routes            []routeConfig `json:"routes"`
}

// lookupEnv is how config reads the environment; tests replace it.
var lookupEnv = os.LookupEnv

func envOr(key, def string) string {
	if v, ok := lookupEnv(key); ok && v != "" {
		return v
	}
	return def
}

func (c *proxyConfig) register(fs *pflag.FlagSet) {
	idle, err := time.ParseDuration(envOr("ORCHARD_IDLE_TIMEOUT", "10m"))
	if err != nil {
		idle = 10 * time.Minute
	}
	fs.StringVar(&c.Listen, "listen", envOr("ORCHARD_LISTEN", "127.0.0.1:8080"), "address to serve on (env ORCHARD_LISTEN)")
	fs.StringVar(&c.Upstream, "upstream", envOr("ORCHARD_UPSTREAM", "http://127.0.0.1:8000/v1"), "OpenAI-style upstream base URL (env ORCHARD_UPSTREAM)")
	fs.StringVar(&c.AnthropicUpstream, "anthropic-upstream", envOr("ORCHARD_ANTHROPIC_UPSTREAM", ""), "upstream base URL for /v1/messages (default: --upstream; env ORCHARD_ANTHROPIC_UPSTREAM)")
	fs.StringVar(&c.UpstreamKey, "upstream-key", envOr("ORCHARD_UPSTREAM_API_KEY", ""), "credential sent upstream instead of the client's (env ORCHARD_UPSTREAM_API_KEY)")
	fs.StringVar(&c.UpstreamKind, "upstream-kind", envOr("ORCHARD_UPSTREAM_KIND", "auto"), "upstream type: auto (ask the server), vllm, sglang, openai or anthropic (env ORCHARD_UPSTREAM_KIND)")
	fs.StringVar(&c.Data, "data", envOr("ORCHARD_DATA", "./orchard-data"), "embedded store directory (env ORCHARD_DATA)")
	fs.StringVar(&c.Redis, "redis", envOr("ORCHARD_REDIS_URL", ""), "Redis URL; overrides --data (env ORCHARD_REDIS_URL)")
	fs.DurationVar(&c.IdleTimeout, "idle-timeout", idle, "abandon an upstream exchange after this long without a byte (env ORCHARD_IDLE_TIMEOUT)")
	fs.Int64Var(&c.MaxBody, "max-body", 256<<20, "largest request body accepted, in bytes")
	fs.StringVar(&c.Auth, "auth", envOr("ORCHARD_AUTH", "none"), "none, or required: inference routes need an episode token and /orchard/v1 the admin token (env ORCHARD_AUTH)")
	fs.StringVar(&c.TokenSecret, "token-secret", envOr("ORCHARD_TOKEN_SECRET", ""), "secret that signs episode tokens, the same on every replica (env ORCHARD_TOKEN_SECRET)")
	fs.StringVar(&c.AdminToken, "admin-token", envOr("ORCHARD_ADMIN_TOKEN", ""), "bearer token required on /orchard/v1/* (env ORCHARD_ADMIN_TOKEN)")
	fs.StringVar(&c.PublicURL, "public-url", envOr("ORCHARD_PUBLIC_URL", ""), "base URL sandboxes reach the proxy at, for the env of new episodes (default: the Host of the request; env ORCHARD_PUBLIC_URL)")
	fs.DurationVar(&c.TokenTTL, "token-ttl", 24*time.Hour, "lifetime of episode tokens")
	fs.DurationVar(&c.Retention, "retention", 0, "delete finished episodes this long after they finish, e.g. 168h (0: keep)")
	fs.StringVar(&c.PprofListen, "pprof", "", "serve net/http/pprof on this address (e.g. 127.0.0.1:6060) for profiling; off by default")
	c.serverLimits.register(fs)
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
	return c.serverLimits.validate()
}

// applyFile reads a YAML config file and sets every flag the command line
// did not set.
func (c *proxyConfig) applyFile(fs *pflag.FlagSet, path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	var f fileConfig
	if err := yaml.UnmarshalStrict(raw, &f); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	set := func(name string, v *string) error {
		if v == nil || fs.Changed(name) {
			return nil
		}
		if err := fs.Set(name, *v); err != nil {
			return fmt.Errorf("config %s: %s: %w", path, name, err)
		}
		return nil
	}
	var maxBody *string
	if f.MaxBody != nil {
		s := strconv.FormatInt(*f.MaxBody, 10)
		maxBody = &s
	}
	var key *string
	if f.UpstreamKeyEnv != nil {
		v, _ := lookupEnv(*f.UpstreamKeyEnv)
		key = &v
	}
	for name, v := range map[string]*string{
		"listen": f.Listen, "upstream": f.Upstream, "anthropic-upstream": f.AnthropicUpstream,
		"upstream-kind": f.UpstreamKind, "data": f.Data, "redis": f.Redis, "idle-timeout": f.IdleTimeout,
		"max-body": maxBody, "upstream-key": key, "auth": f.Auth, "public-url": f.PublicURL,
		"retention": f.Retention, "token-ttl": f.TokenTTL,
	} {
		if err := set(name, v); err != nil {
			return err
		}
	}
	c.Routes = f.Routes
	return nil
}

// upstreams builds the proxy's upstream set from the config.
func (c *proxyConfig) upstreams() (def, anth *proxy.Upstream, routes map[string]*proxy.Upstream, err error) {
	def, err = newUpstream("--upstream", c.Upstream, c.UpstreamKey, c.UpstreamKind)
	if err != nil {
		return nil, nil, nil, err
	}
	anth = def
	if c.AnthropicUpstream != "" {
		if anth, err = newUpstream("--anthropic-upstream", c.AnthropicUpstream, c.UpstreamKey, c.UpstreamKind); err != nil {
			return nil, nil, nil, err
		}
	}
	routes = make(map[string]*proxy.Upstream, len(c.Routes))
	for i, r := range c.Routes {
		if r.Model == "" {
			return nil, nil, nil, fmt.Errorf("config routes[%d]: model is required", i)
		}
		key := c.UpstreamKey
		if r.KeyEnv != "" {
			key, _ = lookupEnv(r.KeyEnv)
		}
		kind := r.Kind
		if kind == "" {
			kind = c.UpstreamKind
		}
		up, err := newUpstream(fmt.Sprintf("config routes[%d] (%s)", i, r.Model), r.Upstream, key, kind)
		if err != nil {
			return nil, nil, nil, err
		}
		routes[r.Model] = up
	}
	return def, anth, routes, nil
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
