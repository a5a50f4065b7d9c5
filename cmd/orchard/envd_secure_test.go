package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// searchableTempDir is a t.TempDir that the sandbox user can search, with
// its parent: the embedded envd's state dir, when the tests run as root
// (bubblewrap then runs as that user and t.TempDir makes dirs 0700).
func searchableTempDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	for _, p := range []string{d, filepath.Dir(d)} {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// TestEnsureToken: envd without --token generates one on loopback and
// refuses to start on any other address.
func TestEnsureToken(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, listen, token, wantErr string
		generated                    bool
	}{
		{"loopback v4", "127.0.0.1:7000", "", "", true},
		{"loopback v6", "[::1]:7000", "", "", true},
		{"localhost", "localhost:0", "", "", true},
		{"given", "0.0.0.0:7000", "t0k", "", false},
		{"all addresses", "0.0.0.0:7000", "", "is not a loopback address: set --token", false},
		{"empty host", ":7000", "", "is not a loopback address: set --token", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			cfg := &envdConfig{Listen: tt.listen, Token: tt.token}
			err := ensureToken(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ensureToken(%s) = %v, want %q", tt.listen, err, tt.wantErr)
				}
				return
			}
			if err != nil || cfg.Token == "" {
				t.Fatalf("ensureToken(%s) = %v, token %q", tt.listen, err, cfg.Token)
			}
			if got := strings.Contains(logs.String(), "token="+cfg.Token); got != tt.generated {
				t.Errorf("token logged = %v, want %v (logs %q)", got, tt.generated, logs.String())
			}
		})
	}
}
