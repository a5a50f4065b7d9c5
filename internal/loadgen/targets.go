package loadgen

import "os"

// target is one system under load.
type target struct {
	Key   string // a..f
	Name  string
	Desc  string
	redis bool // needs the Redis server and a Redis-capable orchard
	bench bool // args run the orchard-bench binary, not orchard
	// args returns the proxy's command line after the binary; nil for the
	// upstream itself, which is not a separate proxy process.
	args func(e targetEnv) []string
	// store returns the --data or --redis flags that read what an orchard
	// target recorded; nil for targets that record nothing.
	store func(e targetEnv) []string
}

// targetEnv is what a target's command line is built from.
type targetEnv struct {
	upstream string // http://127.0.0.1:P
	listen   string
	data     string // fresh directory for the embedded store and spill files
	redis    string // redis://127.0.0.1:P/0
}

func orchardArgs(e targetEnv, extra ...string) []string {
	a := []string{"proxy", "--listen", e.listen, "--upstream", e.upstream + "/v1"}
	// For profiling a target while it is under load (see docs/benchmarks.md):
	// its cells run one at a time, so one address serves them all in turn.
	if addr := os.Getenv("ORCHARD_BENCH_PPROF"); addr != "" {
		a = append(a, "--pprof", addr)
	}
	return append(a, extra...)
}

func embeddedStore(e targetEnv) []string { return []string{"--data", e.data} }
func redisStore(e targetEnv) []string    { return []string{"--redis", e.redis} }

// targets are the upstream, the bare floor and the orchard proxy on each
// store, with and without vLLM token injection.
var targets = []target{
	{Key: "a", Name: "upstream", Desc: "the upstream directly"},
	{Key: "b", Name: "bare", Desc: "httputil.ReverseProxy, FlushInterval -1 (the floor)", bench: true,
		args: func(e targetEnv) []string {
			return []string{"bare-proxy", "--listen", e.listen, "--upstream", e.upstream}
		}},
	{Key: "c", Name: "orchard", Desc: "orchard proxy, embedded store",
		args:  func(e targetEnv) []string { return orchardArgs(e, "--data", e.data) },
		store: embeddedStore},
	{Key: "d", Name: "orchard-redis", Desc: "orchard proxy, Redis store", redis: true,
		args:  func(e targetEnv) []string { return orchardArgs(e, "--redis", e.redis) },
		store: redisStore},
	{Key: "e", Name: "orchard-redis-vllm", Desc: "(d) with --upstream-kind vllm token injection", redis: true,
		args:  func(e targetEnv) []string { return orchardArgs(e, "--redis", e.redis, "--upstream-kind", "vllm") },
		store: redisStore},
	{Key: "f", Name: "orchard-vllm", Desc: "(c) with --upstream-kind vllm token injection",
		args:  func(e targetEnv) []string { return orchardArgs(e, "--data", e.data, "--upstream-kind", "vllm") },
		store: embeddedStore},
}

// TargetKeys lists the known target keys in order.
func TargetKeys() []string {
	out := make([]string, len(targets))
	for i, t := range targets {
		out[i] = t.Key
	}
	return out
}

func targetByKey(k string) (target, bool) {
	for _, t := range targets {
		if t.Key == k || t.Name == k {
			return t, true
		}
	}
	return target{}, false
}
