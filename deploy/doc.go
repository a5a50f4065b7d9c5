// Package deploy holds orchard's Kubernetes manifests (kustomize base and
// overlays dev and production, the sharded export Job, the Grafana
// dashboard) and, in its tests, the proof that they work: every overlay
// renders with kustomize as a library, every object is accepted by a real
// API server's server-side dry-run apply, the proxy and envd pods are
// scheduled on a kwok node, and the dashboard queries only metrics the
// proxy really exports. The package has no Go API; docs/deploy.md is the
// user's guide.
package deploy
