// Package archtest holds the repository's architecture tests: which
// top-level packages may import which (data flows proxy -> recorder ->
// reconstruct -> rl; envd talks to the proxy over HTTP only), and that every
// package states its contract in a package doc, and that no binary links
// packages known to cost every process memory for nothing (the generated
// Kubernetes clientset). It has no code of its own.
package archtest
