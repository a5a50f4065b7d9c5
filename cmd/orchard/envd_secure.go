package main

import (
	"fmt"
	"io"
	"log/slog"
	"net"

	"github.com/orchard-rl/orchard/envd"
	"github.com/orchard-rl/orchard/envd/local"
)

// ensureToken makes envd's API require a token: without --token, one is
// generated and logged when envd listens on loopback only, and envd
// refuses to start on any other address (sandboxes in network mode host,
// and other machines, could otherwise create, exec in and finish
// sandboxes, rewards included).
func ensureToken(cfg *envdConfig, lg *slog.Logger) error {
	if cfg.Token != "" {
		return nil
	}
	host, _, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", cfg.Listen, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--listen %s is not a loopback address: set --token (env ORCHARD_ENVD_TOKEN), which clients send as Authorization: Bearer", cfg.Listen)
	}
	cfg.Token = randomToken()
	lg.Warn("no --token given: generated one; clients send it as Authorization: Bearer", "token", cfg.Token)
	return nil
}

// printJail prints the mounts of a default sandbox's jail on the local
// backend, one per line.
func printJail(w io.Writer, cfg *envdConfig) error {
	cfg.Local.Logger = slog.New(slog.DiscardHandler)
	b, err := local.New(cfg.Local)
	if err != nil {
		return err
	}
	_, err = io.WriteString(w, b.DescribeJail(envd.Spec{Workdir: "/work", Network: cfg.Local.Network}))
	return err
}
