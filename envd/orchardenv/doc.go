// Package orchardenv serves the REST API of Microsoft Orchard's sandbox
// orchestrator (Orchard Env: POST /sandboxes, exec as jobs, files as
// base64, apply_patch, heartbeat, X-API-Key) on top of an [envd.Manager],
// so a program written against Orchard's Python SDK drives envd's
// sandboxes by changing one URL.
//
// It is a translation layer only: every sandbox is an envd sandbox
// created, reached and deleted through the Manager (whose backend is the
// local jail or Kubernetes), and every command, file and patch goes to
// the sandbox's agent through [envd.Manager.Forward], in process. What it
// owns is the Orchard shapes and the job table: a job is one command run
// in the background whose result the client polls or waits for.
//
// The mapping of fields, status codes and every difference from Orchard
// is documented in docs/orchard-env-compat.md. A [Handler] is safe for
// concurrent use; [Handler.Close] stops the jobs still running.
package orchardenv
