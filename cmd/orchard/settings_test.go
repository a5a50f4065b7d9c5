package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/orchard-rl/orchard/internal/cliconf"
)

// sample is a value of one flag type as the command line, the
// environment and a config file give it, and the String each leaves.
type sample struct {
	cli, env, file   string // file is YAML
	wantCLI, wantEnv string
	wantFile         string
	bad              string // an env value Set refuses; "" for none
}

var samples = map[string]sample{
	"string":      {"c", "e", "f", "c", "e", "f", ""},
	"bool":        {"true", "false", "true", "true", "false", "true", "maybe"},
	"int":         {"7", "8", "9", "7", "8", "9", "x"},
	"int64":       {"7", "8", "9", "7", "8", "9", "x"},
	"uint64":      {"7", "8", "9", "7", "8", "9", "-1"},
	"float64":     {"0.5", "0.25", "0.75", "0.5", "0.25", "0.75", "x"},
	"duration":    {"7s", "8s", "9s", "7s", "8s", "9s", "ten"},
	"stringSlice": {"a,b", "c,d", "[e, f]", "[a,b]", "[c,d]", "[e,f]", `"a`},
	"stringArray": {"a", "b", "[c, d]", "[a]", "[b]", "[c,d]", ""},
	"routes": {`[{"model":"c","upstream":"http://c/v1"}]`, `[{"model":"e","upstream":"http://e/v1"}]`,
		"[{model: f, upstream: 'http://f/v1'}]", `[{"model":"c","upstream":"http://c/v1"}]`,
		`[{"model":"e","upstream":"http://e/v1"}]`, `[{"model":"f","upstream":"http://f/v1"}]`, "{"},
}

// boundFlag is one flag of one subcommand that takes env and file values.
type boundFlag struct {
	path []string // subcommand path below the root
	name string
	typ  string
	env  string // its first environment variable
	key  string // its config file key; "" for secrets
}

// boundFlags lists every such flag of every subcommand of orchard.
func boundFlags(t *testing.T) []boundFlag {
	t.Helper()
	var all []boundFlag
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if c.HasParent() && !c.DisableFlagParsing && c.Runnable() {
			all = append(all, flagsOf(t, c)...)
		}
	}
	walk(newRootCmd())
	if len(all) < 50 {
		t.Fatalf("found %d flags; the walk is broken", len(all))
	}
	return all
}

func flagsOf(t *testing.T, c *cobra.Command) []boundFlag {
	t.Helper()
	if err := c.ParseFlags(nil); err != nil { // merges the root's --config
		t.Fatal(err)
	}
	path := strings.Fields(c.CommandPath())[1:]
	var out []boundFlag
	c.Flags().VisitAll(func(f *pflag.Flag) {
		envs := cliconf.EnvNames(envPrefix, f)
		if len(envs) == 0 || f.Name == "config" {
			return
		}
		out = append(out, boundFlag{path, f.Name, f.Value.Type(), envs[0], cliconf.Key(f)})
	})
	return out
}

// settle parses args on a fresh orchard, applies env and file, and returns
// the flag's value.
func (b boundFlag) settle(t *testing.T, env map[string]string, file string, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	cmd, _, err := root.Find(b.path)
	if err != nil {
		t.Fatal(err)
	}
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	if file != "" {
		path := filepath.Join(t.TempDir(), "orchard.yaml")
		if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
		env = withEnv(env, "ORCHARD_CONFIG", path)
	}
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	err = applySettings(cmd, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	return cmd.Flags().Lookup(b.name).Value.String(), err
}

func withEnv(env map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for k, v := range env {
		out[k] = v
	}
	return out
}

// TestEveryFlagHasEnvAndFile checks, for every flag of every subcommand,
// that its derived env variable and config key apply, and that the
// command line beats the environment, which beats the file.
func TestEveryFlagHasEnvAndFile(t *testing.T) {
	t.Parallel()
	for _, b := range boundFlags(t) {
		t.Run(strings.Join(append(b.path, b.name), "/"), func(t *testing.T) {
			s, ok := samples[b.typ]
			if !ok {
				t.Fatalf("no sample for flag type %q: add one to samples", b.typ)
			}
			file := ""
			if b.key != "" {
				file = b.key + ": " + s.file + "\n"
				b.check(t, "file", s.wantFile, nil, file)
			}
			env := map[string]string{b.env: s.env}
			b.check(t, "env over file", s.wantEnv, env, file)
			b.check(t, "command line over env", s.wantCLI, env, file, "--"+b.name+"="+s.cli)
		})
	}
}

func (b boundFlag) check(t *testing.T, what, want string, env map[string]string, file string, args ...string) {
	t.Helper()
	got, err := b.settle(t, env, file, args...)
	if err != nil || got != want {
		t.Errorf("%s: --%s = %q, %v; want %q", what, b.name, got, err, want)
	}
}

// TestBadValuesNameTheFlag checks that a value the flag refuses is an
// error naming the flag and the source, never a silent default.
func TestBadValuesNameTheFlag(t *testing.T) {
	t.Parallel()
	for _, b := range boundFlags(t) {
		s := samples[b.typ]
		if s.bad == "" {
			continue
		}
		t.Run(strings.Join(append(b.path, b.name), "/"), func(t *testing.T) {
			_, err := b.settle(t, map[string]string{b.env: s.bad}, "")
			want := fmt.Sprintf("%s=%q: invalid %s for --%s", b.env, s.bad, b.typ, b.name)
			if err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("%s=%q: err = %v, want %q", b.env, s.bad, err, want)
			}
			if b.key == "" {
				return
			}
			_, err = b.settle(t, nil, fmt.Sprintf("%s: %q\n", b.key, s.bad))
			if err == nil || !strings.Contains(err.Error(), "for --"+b.name) {
				t.Fatalf("file %s: %q: err = %v, want one naming --%s", b.key, s.bad, err, b.name)
			}
		})
	}
}

func TestIdleTimeoutTypo(t *testing.T) {
	b := boundFlag{path: []string{"proxy"}, name: "idle-timeout"}
	_, err := b.settle(t, map[string]string{"ORCHARD_IDLE_TIMEOUT": "ten"}, "")
	want := `ORCHARD_IDLE_TIMEOUT="ten": invalid duration for --idle-timeout`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %s", err, want)
	}
}

// TestDocumentedEnvNames pins the environment variables that docs and
// deployments use, whatever the derivation would give.
func TestDocumentedEnvNames(t *testing.T) {
	t.Parallel()
	tests := []struct{ cmd, flag, env string }{
		{"proxy", "listen", "ORCHARD_LISTEN"},
		{"proxy", "upstream", "ORCHARD_UPSTREAM"},
		{"proxy", "anthropic-upstream", "ORCHARD_ANTHROPIC_UPSTREAM"},
		{"proxy", "upstream-key", "ORCHARD_UPSTREAM_API_KEY"},
		{"proxy", "upstream-kind", "ORCHARD_UPSTREAM_KIND"},
		{"proxy", "data", "ORCHARD_DATA"},
		{"proxy", "redis", "ORCHARD_REDIS_URL"},
		{"proxy", "idle-timeout", "ORCHARD_IDLE_TIMEOUT"},
		{"proxy", "auth", "ORCHARD_AUTH"},
		{"proxy", "token-secret", "ORCHARD_TOKEN_SECRET"},
		{"proxy", "admin-token", "ORCHARD_ADMIN_TOKEN"},
		{"proxy", "public-url", "ORCHARD_PUBLIC_URL"},
		{"proxy", "spill-dir", "ORCHARD_SPILL_DIR"},
		{"export", "redis", "ORCHARD_REDIS_URL"},
		{"envd", "listen", "ORCHARD_ENVD_LISTEN"},
		{"envd", "proxy", "ORCHARD_PROXY_URL"},
		{"envd", "admin-token", "ORCHARD_ADMIN_TOKEN"},
		{"envd", "token", "ORCHARD_ENVD_TOKEN"},
		{"envd", "state-dir", "ORCHARD_ENVD_STATE"},
		{"envd", "kubeconfig", "KUBECONFIG"},
		{"envd", "namespace", "ORCHARD_ENVD_NAMESPACE"},
		{"envd", "agent-image", "ORCHARD_AGENT_IMAGE"},
		{"run", "envd", "ORCHARD_ENVD_URL"},
		{"run", "envd-token", "ORCHARD_ENVD_TOKEN"},
		{"run", "proxy", "ORCHARD_PROXY_URL"},
		{"rollout", "admin-token", "ORCHARD_ADMIN_TOKEN"},
		{"view", "listen", "ORCHARD_VIEW_LISTEN"},
		{"view", "auth", "ORCHARD_AUTH"},
		{"rerank", "scorer-url", "ORCHARD_SCORER_URL"},
		{"rerank", "scorer-token", "ORCHARD_SCORER_TOKEN"},
	}
	for _, tt := range tests {
		b := boundFlag{path: []string{tt.cmd}, name: tt.flag}
		s := samples["string"]
		if tt.flag == "idle-timeout" {
			s = samples["duration"]
		}
		got, err := b.settle(t, map[string]string{tt.env: s.env}, "")
		if err != nil || got != s.wantEnv {
			t.Errorf("%s --%s from %s = %q, %v; want %q", tt.cmd, tt.flag, tt.env, got, err, s.wantEnv)
		}
	}
}

// TestRenamedFlags checks that the old spellings still work, with a note.
func TestRenamedFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		path      []string
		old, name string
	}{
		{[]string{"episodes", "list"}, "task", "task-id"},
		{[]string{"episodes", "list"}, "group", "group-id"},
		{[]string{"export"}, "task", "task-id"},
		{[]string{"export"}, "group", "group-id"},
		{[]string{"rerank"}, "task", "task-id"},
		{[]string{"rerank", "eval"}, "group", "group-id"},
	}
	for _, tt := range tests {
		cmd, _, err := newRootCmd().Find(tt.path)
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.SetOut(&stderr) // cobra prints flag notes there, else to stderr
		cmd.SetErr(&stderr)
		if err := cmd.ParseFlags([]string{"--" + tt.old, "old"}); err != nil {
			t.Fatal(err)
		}
		env := map[string]string{"ORCHARD_" + strings.ToUpper(strings.ReplaceAll(tt.name, "-", "_")): "env"}
		if err := applySettings(cmd, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
			t.Fatal(err)
		}
		if got := cmd.Flags().Lookup(tt.name).Value.String(); got != "old" {
			t.Errorf("%v --%s old: --%s = %q, want %q (the command line beats env)", tt.path, tt.old, tt.name, got, "old")
		}
		if want := "--" + tt.old + " has been deprecated, use --" + tt.name; !strings.Contains(stderr.String(), want) {
			t.Errorf("%v --%s: stderr %q, want it to contain %q", tt.path, tt.old, stderr.String(), want)
		}
	}
}

// TestHelpShowsEnv checks that help lists each flag's env variable.
func TestHelpShowsEnv(t *testing.T) {
	t.Parallel()
	cmd, _, err := newRootCmd().Find([]string{"envd"})
	if err != nil {
		t.Fatal(err)
	}
	usage := cmd.Flags().FlagUsages() + cmd.InheritedFlags().FlagUsages()
	for _, want := range []string{"(env ORCHARD_ENVD_LISTEN)", "(env ORCHARD_KUBECONFIG or KUBECONFIG)", "(env ORCHARD_MAX_SANDBOXES)", "(env ORCHARD_CONFIG)"} {
		if !strings.Contains(usage, want) {
			t.Errorf("envd help lacks %q:\n%s", want, usage)
		}
	}
}

// TestOneVocabulary checks that every flag has an ORCHARD_ variable, that
// one variable always sets a flag of one name, and that one flag name
// reads one variable in every command, except the server settings that
// are named for their server.
func TestOneVocabulary(t *testing.T) {
	t.Parallel()
	perServer := map[string]bool{"listen": true, "idle-timeout": true}
	// envd's --token and its clients' --envd-token are one secret: a
	// shared environment gives both sides the same value.
	shared := map[string]bool{"ORCHARD_ENVD_TOKEN": true}
	flagOf := map[string]string{} // env -> flag name
	envOf := map[string]string{}  // flag name -> env
	for _, b := range boundFlags(t) {
		if !strings.HasPrefix(b.env, envPrefix) {
			t.Errorf("%v --%s reads %s, want an %s variable first", b.path, b.name, b.env, envPrefix)
		}
		if f, ok := flagOf[b.env]; ok && f != b.name && !shared[b.env] {
			t.Errorf("%s sets both --%s and --%s (%v)", b.env, f, b.name, b.path)
		}
		flagOf[b.env] = b.name
		if e, ok := envOf[b.name]; ok && e != b.env && !perServer[b.name] {
			t.Errorf("--%s reads %s in one command and %s in %v", b.name, e, b.env, b.path)
		}
		envOf[b.name] = b.env
	}
}

// TestOneConfigFile checks that one file serves every subcommand: each
// takes its own keys and skips the others', and a typo is still an error.
func TestOneConfigFile(t *testing.T) {
	t.Parallel()
	file := "data: /shared\nupstream: http://u:1/v1\nmax-sandboxes: 3\ntask-id: t\n"
	for _, path := range [][]string{{"proxy"}, {"episodes", "list"}, {"export", "merge"}, {"envd"}, {"rollout", "plan"}} {
		b := boundFlag{path: path, name: "config"}
		if _, err := b.settle(t, nil, file); err != nil {
			t.Errorf("%v: %v", path, err)
		}
	}
	b := boundFlag{path: []string{"episodes", "list"}, name: "data"}
	if got, err := b.settle(t, nil, file); err != nil || got != "/shared" {
		t.Errorf("episodes list --data = %q, %v; want /shared", got, err)
	}
	if _, err := b.settle(t, nil, file+"upstrem: x\n"); err == nil || !strings.Contains(err.Error(), `unknown key "upstrem"`) {
		t.Errorf("typo: err = %v, want unknown key", err)
	}
}
