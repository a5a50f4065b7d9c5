// Package envd serves sandboxes that run unmodified agent harnesses wired to
// the recording proxy, on a local jail backend or on Kubernetes.
package envd
