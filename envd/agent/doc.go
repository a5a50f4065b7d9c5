// Package agent is the process that runs inside every sandbox and does the
// sandbox's work on envd's behalf: it starts commands in their own process
// groups (with timeouts that kill the whole group), streams their output as
// events that a client can reattach to by exec id, and reads and writes
// files and tar archives. On the local backend envd reaches it over a Unix
// socket that envd created and handed in as a file descriptor; on
// Kubernetes it listens on the pod IP and is started as the pod's command
// ("orchard sandbox-agent -- <entrypoint>"). There it is PID 1, so it
// becomes a minimal init that runs the agent as its child and reaps the
// orphans PID 1 inherits ([RunInit]).
//
// Every route lives under /agent/v1/; envd maps /envd/v1/sandboxes/{id}/X
// to /agent/v1/X, so both speak the same request and response shapes
// ([envd.ExecRequest], [envd.ExecResult], [envd.Event]).
package agent
