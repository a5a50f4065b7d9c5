package agent

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseArgs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want Config
	}{
		{"defaults", nil, Config{Listen: ":7070", TokenEnv: "ORCHARD_AGENT_TOKEN", DefaultTimeout: 10 * time.Minute}},
		{"local backend", []string{"--listen-fd", "3", "--workdir", "/w", "--egress-listen", "127.0.0.1:9", "--egress-socket", "/s"},
			Config{Listen: ":7070", ListenFD: 3, Workdir: "/w", TokenEnv: "ORCHARD_AGENT_TOKEN", DefaultTimeout: 10 * time.Minute,
				EgressListen: "127.0.0.1:9", EgressSocket: "/s"}},
		{"entrypoint after --", []string{"--listen=:1", "--default-timeout=1m", "--", "/app", "--port", "8"},
			Config{Listen: ":1", TokenEnv: "ORCHARD_AGENT_TOKEN", DefaultTimeout: time.Minute, Entrypoint: []string{"/app", "--port", "8"}}},
		{"entrypoint from the first non-flag", []string{"--init", "/app", "--port", "8"},
			Config{Listen: ":7070", TokenEnv: "ORCHARD_AGENT_TOKEN", DefaultTimeout: 10 * time.Minute, Init: true, Entrypoint: []string{"/app", "--port", "8"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseArgs(tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if !equalConfig(got, tt.want) {
				t.Errorf("ParseArgs(%q) = %+v, want %+v", tt.args, got, tt.want)
			}
		})
	}
}

func equalConfig(a, b Config) bool {
	return slices.Equal(a.Entrypoint, b.Entrypoint) && fmt.Sprint(a) == fmt.Sprint(b)
}

func TestParseArgsErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--default-timeout", "ten"}, "--default-timeout"},
		{[]string{"--listen-fd", "x"}, "--listen-fd"},
		{[]string{"--no-such-flag"}, "no-such-flag"},
		{[]string{"-listen", ":1"}, "shorthand"}, // one dash is not a long flag
	}
	for _, tt := range tests {
		_, err := ParseArgs(tt.args)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseArgs(%q) = %v, want an error mentioning %q", tt.args, err, tt.want)
		}
	}
	if _, err := ParseArgs([]string{"--help"}); !errors.Is(err, ErrHelp) {
		t.Errorf("ParseArgs(--help) = %v, want ErrHelp", err)
	}
	if u := FlagUsages(); !strings.Contains(u, "--listen-fd int") || !strings.Contains(u, "--token-env string") {
		t.Errorf("FlagUsages() = %q, want every flag", u)
	}
}
