// Package client is the Go client of envd's sandbox API.
//
//	c := client.New(client.Options{BaseURL: "http://127.0.0.1:7000"})
//	sb, err := c.Create(ctx, envd.Spec{Workdir: "/work"})
//	if err != nil { ... }
//	defer sb.Close() // deletes the sandbox, like a Python context manager
//	res, err := sb.Exec(ctx, envd.ExecRequest{Shell: "make test"})
//
// Requests that never reached the server (refused or failed dials) are
// retried with backoff; idempotent ones (GET, PUT, DELETE) are also retried
// on broken connections. Streams have a read timeout, and a stream whose
// connection breaks reattaches by exec id from the last event it saw.
package client
