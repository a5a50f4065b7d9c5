// Package proxy is orchard's recording reverse proxy: it forwards OpenAI- and
// Anthropic-compatible model calls to an inference server untouched and tees
// a copy of each exchange to a [Sink], attributed to its episode.
//
// A request's path: the [Handler] routes /v1/* and /e/{episode}/v1/* to
// serveAPI (routes.go, forward.go); HEAD probes, /healthz and /metrics are
// answered there, any other path is a JSON 404. attribute (attribution.go)
// takes the episode from the URL, the X-Orchard-Episode header or an
// episode token that Options.Verifier accepts; a refused call gets a 401
// and reaches neither the upstream nor the record. For a recorded API the
// exchange (exchange.go) reads the body under a deadline and a size cap,
// picks the upstream by path and model, and may patch the request for
// usage and token ids (inject.go). An httputil.ReverseProxy sends it:
// rewrite puts the upstream key in place of the client's credential, and
// modifyResponse wraps the response body in a tee that copies the bytes as
// they flow, removing what the patch added (strip.go). When the body is
// closed, the exchange goes to a record worker (record.go), which builds
// the orchard.call/v1 record; records are released per episode in arrival
// order (order.go), classified by the lineage tracker and handed to the
// Sink. The client never waits on a record, and no record is dropped.
//
// A stream reaches the client flushed as it arrives; serving the Handler
// through a listener from [Listener] lets it send a burst of events that
// outruns the server's connection buffer in one write syscall instead of
// two or three (flush.go). Without it, every write is flushed as the
// server splits it.
//
// [New] starts nothing: [Handler.Start] starts the record workers and the
// upstream-kind probes, and a Handler not started answers 503. Close waits
// until every finished exchange's record has reached the Sink.
//
// The proxy serves no episode API and issues no tokens: cmd/orchard mounts
// package proxy/episodes beside it and passes it in as the Verifier.
package proxy
