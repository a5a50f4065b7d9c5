package loadgen

import (
	"os"
	"strings"
)

// target is one system under load.
type target struct {
	Key   string // a..f, b+ids; a baseline twin adds "'"
	Name  string
	Desc  string
	redis bool // needs the Redis server and a Redis-capable orchard
	bench bool // args run the orchard-bench binary, not orchard
	// ids: the client asks for token ids and logprobs itself, as orchard
	// asks a vLLM upstream (b+ids, the token path's floor).
	ids bool
	// tokens: orchard's token path (--upstream-kind vllm), compared with
	// b+ids as well as with b.
	tokens bool
	// of is, for a baseline twin (run by Config.BaselineBin), its
	// original's key; "" otherwise.
	of string
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
	pprof    string // an orchard proxy's --pprof address; "" for none
}

func orchardArgs(e targetEnv, extra ...string) []string {
	a := []string{"proxy", "--listen", e.listen, "--upstream", e.upstream + "/v1"}
	// For profiling a target while it is under load (see docs/benchmarks.md):
	// its cells run one at a time, so one address serves them all in turn,
	// unless the suite takes the profiles itself (Config.CPUProfiles).
	addr := e.pprof
	if addr == "" {
		addr = os.Getenv("ORCHARD_BENCH_PPROF")
	}
	if addr != "" {
		a = append(a, "--pprof", addr)
	}
	return append(a, extra...)
}

func embeddedStore(e targetEnv) []string { return []string{"--data", e.data} }
func redisStore(e targetEnv) []string    { return []string{"--redis", e.redis} }

func bareArgs(e targetEnv) []string {
	return []string{"bare-proxy", "--listen", e.listen, "--upstream", e.upstream}
}

// orchardTarget is an orchard proxy target: embedded or Redis store, and
// the upstream kind it is told (always explicit, so that a proxy that
// detects the kind by default still runs the path the target names).
func orchardTarget(key, name, desc string, redis bool, kind string) target {
	store := embeddedStore
	if redis {
		store = redisStore
	}
	return target{Key: key, Name: name, Desc: desc, redis: redis, tokens: kind == "vllm", store: store,
		args: func(e targetEnv) []string {
			return orchardArgs(e, append(store(e), "--upstream-kind", kind)...)
		}}
}

// targets are the upstream, the bare floors and the orchard proxy on each
// store, with and without vLLM token injection.
var targets = []target{
	{Key: "a", Name: "upstream", Desc: "the upstream directly"},
	{Key: "b", Name: "bare", Desc: "httputil.ReverseProxy, FlushInterval -1 (the floor)", bench: true, args: bareArgs},
	{Key: "b+ids", Name: "bare-ids", Desc: "(b) with a client that asks for token ids and logprobs (the token path's floor)",
		bench: true, ids: true, args: bareArgs},
	orchardTarget("c", "orchard", "orchard proxy, embedded store, --upstream-kind openai", false, "openai"),
	orchardTarget("d", "orchard-redis", "orchard proxy, Redis store, --upstream-kind openai", true, "openai"),
	orchardTarget("e", "orchard-redis-vllm", "(d) with --upstream-kind vllm token injection", true, "vllm"),
	orchardTarget("f", "orchard-vllm", "(c) with --upstream-kind vllm token injection", false, "vllm"),
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

// baselineTwin is t run by the baseline binary: key t.Key+"'", name
// t.Name+"-base".
func baselineTwin(t target) target {
	b := t
	b.Key, b.Name, b.of = t.Key+"'", t.Name+"-base", t.Key
	b.Desc = "(" + t.Key + ") run by the baseline binary (--baseline-bin)"
	return b
}

// slug is t's key as it may appear in an episode id: "b+ids" -> "b_ids",
// "c'" -> "c_base".
func (t target) slug() string {
	return strings.NewReplacer("+", "_", "'", "_base").Replace(t.Key)
}

// recording reports whether t is an orchard proxy (it records calls).
func (t target) recording() bool { return t.store != nil }
