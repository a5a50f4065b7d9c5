package cliconf

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// testFlags is a small command: a few flag types, a renamed flag, a
// secret, a legacy env name and the config flag.
type testFlags struct {
	listen  string
	idle    time.Duration
	max     int
	verbose bool
	n       int
	ids     []string
	taskID  string
	secret  string
	config  string
}

func newTestFlags() (*pflag.FlagSet, *testFlags) {
	var v testFlags
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs.StringVar(&v.listen, "listen", "127.0.0.1:1", "address")
	fs.DurationVar(&v.idle, "idle-timeout", time.Minute, "idle limit")
	fs.IntVar(&v.max, "max-conns", 4, "connections")
	fs.BoolVar(&v.verbose, "verbose", false, "talk")
	fs.IntVar(&v.n, "n", 1, "count")
	fs.StringSliceVar(&v.ids, "episodes", nil, "ids")
	fs.StringVar(&v.taskID, "task-id", "", "task")
	Alias(fs, "task", "task-id")
	fs.StringVar(&v.secret, "token-secret", "", "secret")
	EnvOnly(fs, "token-secret")
	SetEnv(fs, "listen", "T_SERVER_LISTEN")
	fs.StringVar(&v.config, "config", "", "config file")
	EnvOnly(fs, "config")
	return fs, &v
}

// apply parses args, writes file (if any) and applies env and file.
func apply(t *testing.T, env map[string]string, file string, args ...string) (*testFlags, error) {
	t.Helper()
	fs, v := newTestFlags()
	fs.SetOutput(new(strings.Builder))
	if file != "" {
		path := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--config", path)
	}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	lookup := func(k string) (string, bool) { s, ok := env[k]; return s, ok }
	other := pflag.NewFlagSet("other", pflag.ContinueOnError)
	other.String("upstream", "", "another command's flag")
	other.String("admin-token", "", "another command's secret")
	EnvOnly(other, "admin-token")
	return v, Apply(fs, Options{Prefix: "T_", LookupEnv: lookup, ConfigFlag: "config", Shared: []*pflag.FlagSet{other}})
}

func TestApplyPrecedence(t *testing.T) {
	env := map[string]string{"T_IDLE_TIMEOUT": "2m", "T_MAX_CONNS": "9", "T_SERVER_LISTEN": "env:1",
		"T_LISTEN": "ignored:1", "T_TASK_ID": "env-task", "T_VERBOSE": ""}
	file := "idle_timeout: 3m\nmax-conns: 10\nn: 3\nverbose: true\nepisodes: [a, b]\ntask-id: file-task\nupstream: other-command\n"
	v, err := apply(t, env, file, "--max-conns", "11", "--task", "cli-task")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, got, want string }{
		{"command line beats env and file", fmt.Sprint(v.max), "11"},
		{"deprecated alias counts as command line", v.taskID, "cli-task"},
		{"env beats file", v.idle.String(), "2m0s"},
		{"SetEnv replaces the derived name", v.listen, "env:1"},
		{"empty env is unset", fmt.Sprint(v.verbose), "true"},
		{"file list fills a slice", strings.Join(v.ids, "|"), "a|b"},
		{"key n is a name, not YAML 1.1 false", fmt.Sprint(v.n), "3"},
		{"default", v.secret, ""},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}

func TestApplyErrors(t *testing.T) {
	tests := []struct {
		name, file string
		env        map[string]string
		want       string
	}{
		{"bad env duration", "", map[string]string{"T_IDLE_TIMEOUT": "ten"}, `T_IDLE_TIMEOUT="ten": invalid duration for --idle-timeout`},
		{"bad file int", "max_conns: lots\n", nil, `: max_conns="lots": invalid int for --max-conns`},
		{"bad env slice", "", map[string]string{"T_EPISODES": `"a`}, `T_EPISODES="\"a": invalid stringSlice for --episodes: `},
		{"unknown key", "listne: x\n", nil, `unknown key "listne"`},
		{"secret in file", "token_secret: s\n", nil, `key "token_secret" cannot be set in a file: use --token-secret or T_TOKEN_SECRET`},
		{"another command's secret", "admin-token: s\n", nil, `key "admin-token" cannot be set in a file`},
		{"renamed key", "task: x\n", nil, `key "task" was renamed: use task-id`},
		{"two spellings", "max_conns: 1\nmax-conns: 2\n", nil, `keys "max-conns" and "max_conns" are the same setting`},
		{"config names itself", "config: other.yaml\n", nil, `key "config" cannot be set in a file`},
		{"not a mapping", "- a\n", nil, "want a mapping"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := apply(t, tt.env, tt.file)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Apply() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestConfigFromEnv(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("max-conns: 5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	v, err := apply(t, map[string]string{"T_CONFIG": path}, "")
	if err != nil || v.max != 5 {
		t.Fatalf("T_CONFIG: max-conns = %d, %v; want 5 from the file it names", v.max, err)
	}
}

func TestDocument(t *testing.T) {
	fs, _ := newTestFlags()
	Document(fs, "T_")
	Document(fs, "T_")
	tests := []struct{ flag, want string }{
		{"idle-timeout", "idle limit (env T_IDLE_TIMEOUT)"},
		{"listen", "address (env T_SERVER_LISTEN)"},
		{"task", "task"},
	}
	for _, tt := range tests {
		if got := fs.Lookup(tt.flag).Usage; got != tt.want {
			t.Errorf("usage of --%s = %q, want %q", tt.flag, got, tt.want)
		}
	}
}
