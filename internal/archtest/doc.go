// Package archtest holds the repository's architecture tests: which
// top-level packages may import which (data flows proxy -> recorder ->
// reconstruct -> rl; envd talks to the proxy over HTTP only), and that every
// package states its contract in a package doc. It has no code of its own.
package archtest
