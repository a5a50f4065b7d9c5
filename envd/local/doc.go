// Package local is envd's local backend: each sandbox is a bubblewrap jail
// on this machine, with its own work directory, cgroup limits where the
// host delegates them, and the in-sandbox agent (envd/agent) as its first
// process, reached by envd over a unix socket in the sandbox's state
// directory. It runs on Linux only; docs/envd.md states what a jail sees.
package local
