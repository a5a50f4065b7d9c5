// Package kube is envd's Kubernetes backend: each sandbox is a pod in a
// configurable namespace, built from the user's image unchanged. An init
// container copies a static orchard binary into a shared emptyDir and the
// pod's command becomes "orchard sandbox-agent -- <entrypoint>"; envd then
// talks to that agent on the pod IP over pooled cleartext HTTP/2; when it
// cannot connect to the agent (or is told to), it runs execs through the
// API server's pods/exec instead ([Options].ExecVia). A shared
// watch (informer) on the backend's pods reports readiness, and a warm pool
// keeps N ready pods per pod template that Create claims with one label
// patch. Pods carry labels (owner, state, sandbox, template) that the sweep
// selects on after an envd restart. [Rules] lists the RBAC the backend
// needs; deploy/base grants exactly that. It reaches the API server through
// [Pods] ([NewPods]: a REST client that knows core/v1 alone), not the
// generated clientset, whose scheme of every API group would cost every
// orchard process about 15 MB.
//
// [New] starts nothing: [Backend.Start] starts the watch and the warm pool
// and returns once the watch has synced; [Backend.Close] stops them and
// returns the warm pods it failed to delete.
package kube
