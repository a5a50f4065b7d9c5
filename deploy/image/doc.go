// Package image builds orchard's container image without Docker or a
// registry: a static orchard binary, the build host's CA certificates and
// a non-root user (65532) in an OCI image, written as an OCI image layout
// and as a tarball `docker load` (and `podman load`, `ctr import`) read.
//
// The build is reproducible: every file, layer and the config carry one
// fixed timestamp ([Options.Created]), tar headers carry no owner names,
// and layers are gzipped by one library at one level, so the same binary,
// certificates and labels give the same image digest. The same image runs
// the proxy, envd and the in-sandbox agent (`orchard sandbox-agent`).
package image
