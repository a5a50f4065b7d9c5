package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/orchard-rl/orchard/internal/cliconf"
)

// parseProxyConfig builds the config the way `orchard proxy` does: the
// command line, then the environment, then the --config file.
func parseProxyConfig(t *testing.T, env map[string]string, file string, args ...string) (*proxyConfig, error) {
	t.Helper()
	var cfg proxyConfig
	fs := pflag.NewFlagSet("proxy", pflag.ContinueOnError)
	cfg.register(fs)
	fs.String("config", "", "")
	cliconf.EnvOnly(fs, "config")
	if file != "" {
		path := filepath.Join(t.TempDir(), "orchard.yaml")
		if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--config", path)
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	if err := cliconf.Apply(fs, cliconf.Options{Prefix: envPrefix, LookupEnv: lookup, ConfigFlag: "config"}); err != nil {
		return nil, err
	}
	return &cfg, cfg.validate()
}

func TestProxyConfigPrecedence(t *testing.T) {
	env := map[string]string{"ORCHARD_UPSTREAM": "http://env:1/v1", "ORCHARD_LISTEN": "127.0.0.1:7000",
		"ORCHARD_DATA": "/env-data", "ROUTE_KEY": "sk-route", "MAIN_KEY": "sk-main"}
	file := `
upstream: http://file:2/v1
data: /file-data
upstream_kind: vllm
upstream-key-env: MAIN_KEY
routes:
  - model: qwen3-8b
    upstream: http://other:3/v1
    kind: sglang
    key_env: ROUTE_KEY
`
	cfg, err := parseProxyConfig(t, env, file, "--data", "/flag-data")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, got, want string }{
		{"flag beats env and file", cfg.Data, "/flag-data"},
		{"env beats file", cfg.Upstream, "http://env:1/v1"},
		{"env beats default", cfg.Listen, "127.0.0.1:7000"},
		{"default", cfg.Auth, "none"},
		{"file-only setting", cfg.UpstreamKind, "vllm"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, tt.got, tt.want)
		}
	}
	old := lookupEnv
	lookupEnv = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	defer func() { lookupEnv = old }()
	def, _, routes, err := cfg.upstreams()
	if err != nil {
		t.Fatal(err)
	}
	r := routes["qwen3-8b"]
	if def.Kind != "vllm" || def.Key != "sk-main" || r == nil || r.BaseURL.Host != "other:3" || r.Kind != "sglang" || r.Key != "sk-route" {
		t.Fatalf("upstreams: default %+v route %+v", def, r)
	}
}

func TestProxyConfigErrors(t *testing.T) {
	tests := []struct {
		name, file string
		args       []string
		want       string
	}{
		{"unknown key", "upstreem: http://x/v1\n", nil, `unknown key "upstreem"`},
		{"key in file", "upstream_key: sk-secret\n", nil, `key "upstream_key" cannot be set in a file`},
		{"unknown route field", "routes: [{model: m, upstream: http://x/v1, key: sk}]\n", nil, `unknown field "key"`},
		{"bad auth", "", []string{"--auth", "maybe"}, "--auth"},
		{"required without admin", "", []string{"--auth", "required", "--token-secret", "0123456789abcdef"}, "--admin-token"},
		{"short secret", "", []string{"--token-secret", "short"}, "16 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseProxyConfig(t, nil, tt.file, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one mentioning %q", err, tt.want)
			}
		})
	}
	cfg, err := parseProxyConfig(t, nil, "", "--upstream", "ftp://x")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := cfg.upstreams(); err == nil || !strings.Contains(err.Error(), "http(s) base URL") {
		t.Fatalf("bad upstream URL: %v", err)
	}
}

// TestDocumentedConfigFile parses the proxy config file of docs/deploy.md.
func TestDocumentedConfigFile(t *testing.T) {
	doc, err := os.ReadFile("../../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(doc), "A proxy config file:\n\n```yaml\n")
	file, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("docs/deploy.md: no proxy config file example")
	}
	env := map[string]string{"VLLM_API_KEY": "sk-vllm", "SGLANG_API_KEY": "sk-sglang"}
	cfg, err := parseProxyConfig(t, nil, file)
	if err != nil {
		t.Fatal(err)
	}
	old := lookupEnv
	lookupEnv = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	defer func() { lookupEnv = old }()
	def, _, routes, err := cfg.upstreams()
	if err != nil {
		t.Fatal(err)
	}
	if r := routes["qwen3-8b"]; def.Key != "sk-vllm" || r == nil || r.Key != "sk-sglang" || cfg.Retention.Hours() != 168 {
		t.Fatalf("docs example: default %+v, route %+v, retention %v", def, r, cfg.Retention)
	}
}

// TestConfigFileKeysKept parses a config file written for the parallel
// struct that the flags replaced: every key it knew still works.
func TestConfigFileKeysKept(t *testing.T) {
	file := `
listen: 127.0.0.1:9001
upstream: http://a:1/v1
anthropic_upstream: http://b:2
upstream_kind: sglang
upstream_key_env: K
data: /d
redis: redis://r:6379
idle_timeout: 3m
max_body: 1048576
auth: none
public_url: http://p:8080
retention: 1h
token_ttl: 2h
routes: [{model: m, upstream: "http://c:3/v1"}]
`
	cfg, err := parseProxyConfig(t, nil, file)
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(cfg.Listen, cfg.Upstream, cfg.AnthropicUpstream, cfg.UpstreamKind, cfg.UpstreamKeyEnv, cfg.Data, cfg.Redis,
		cfg.IdleTimeout, cfg.MaxBody, cfg.Auth, cfg.PublicURL, cfg.Retention, cfg.TokenTTL, len(cfg.Routes))
	want := fmt.Sprint("127.0.0.1:9001", "http://a:1/v1", "http://b:2", "sglang", "K", "/d", "redis://r:6379",
		3*time.Minute, int64(1<<20), "none", "http://p:8080", time.Hour, 2*time.Hour, 1)
	if got != want {
		t.Fatalf("config = %s\nwant     %s", got, want)
	}
}
