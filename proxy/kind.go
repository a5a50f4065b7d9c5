package proxy

import (
	"fmt"
	"strings"
)

// UpstreamKind names the server type behind an [Upstream], which decides
// what the proxy asks of it (token ids and logprobs from vLLM and SGLang,
// usage in streams from all) and how it undoes that in the answer.
type UpstreamKind string

// Upstream kinds. KindAuto is a setting, KindUnknown a detection result;
// the rest are both.
const (
	// KindAuto learns the kind from the server itself (see [Options.ProbeTimeout]).
	KindAuto      UpstreamKind = "auto"
	KindOpenAI    UpstreamKind = "openai"
	KindVLLM      UpstreamKind = "vllm"
	KindSGLang    UpstreamKind = "sglang"
	KindAnthropic UpstreamKind = "anthropic"
	// KindUnknown is what detection reports for a server that did not say
	// what it is. It is treated as an OpenAI-compatible server: nothing but
	// stream usage is asked of it.
	KindUnknown UpstreamKind = "unknown"
)

// settableKinds are the kinds an operator may configure, in the order an
// error lists them.
var settableKinds = []UpstreamKind{KindAuto, KindVLLM, KindSGLang, KindOpenAI, KindAnthropic}

// ParseUpstreamKind returns the kind named s, or an error naming the valid
// values.
func ParseUpstreamKind(s string) (UpstreamKind, error) {
	for _, k := range settableKinds {
		if string(k) == s {
			return k, nil
		}
	}
	names := make([]string, len(settableKinds))
	for i, k := range settableKinds {
		names[i] = string(k)
	}
	return "", fmt.Errorf("upstream kind %q: want one of %s", s, strings.Join(names, ", "))
}

// injectsTokens reports whether the proxy asks servers of kind k for token
// ids and logprobs.
func (k UpstreamKind) injectsTokens() bool { return k == KindVLLM || k == KindSGLang }

// behaves returns the kind whose rules apply to k: "" (the zero Upstream)
// and KindUnknown behave as OpenAI.
func (k UpstreamKind) behaves() UpstreamKind {
	if k == "" || k == KindUnknown {
		return KindOpenAI
	}
	return k
}
