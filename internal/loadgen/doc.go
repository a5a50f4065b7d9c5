// Package loadgen is orchard's load harness : a cheap local
// upstream that replays vLLM chat-completion streams with tool calls, a load
// generator with a closed-loop mode (N clients, each issuing its next request
// when the last one ends, like wrk) and an open-loop mode (requests start at
// a fixed rate whatever the latency, like vegeta), stream validation, and a
// suite that measures the upstream, a bare httputil.ReverseProxy and
// `orchard proxy` side by side, each proxy in its own process so that CPU
// seconds and peak RSS come from /proc.
//
// The upstream's bytes are rendered once per turn by [llmtest], so they are
// exactly what llmtest (and thus vLLM) sends, and the client can check every
// stream byte for byte: a stream that ends without `data: [DONE]` is
// truncated, one that ends but differs is corrupt, and both are errors.
package loadgen
