package proxy_test

import (
	"encoding/json"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/internal/llmtest"
	"github.com/orchard-rl/orchard/proxy"
	"github.com/orchard-rl/orchard/proxy/proxytest"
	"github.com/orchard-rl/orchard/recorder"
)

// TestLineageAtCallTime: with live lineage, calls of an agent loop through
// a vLLM upstream carry their drift class in the record: the second turn
// extends the first token for token, a resend of the same prompt is a
// retry.
func TestLineageAtCallTime(t *testing.T) {
	// A tokenizer's view of two turns: turn 1's prompt is turn 0's prompt
	// and completion, then the tool results.
	script := &llmtest.Script{Turns: []llmtest.Turn{
		{PromptTokenIDs: []int64{1, 2, 3}, Choice: llmtest.Choice{Content: llmtest.Pieces{"Let", " me", " check"}, TokenIDs: []int64{10, 11, 12}}},
		{PromptTokenIDs: []int64{1, 2, 3, 10, 11, 12, 20, 21}, Choice: llmtest.Choice{Content: llmtest.Pieces{"Sunny"}, TokenIDs: []int64{13}}},
	}}
	e := proxytest.NewWith(t, llmtest.Options{Scripts: map[string]*llmtest.Script{"agent": script}},
		func(o *proxy.Options) { o.Upstream.Kind, o.LiveLineage = proxy.KindVLLM, true })
	msgs := []any{map[string]any{"role": "user", "content": "What is the weather?"}}
	call := func(ua string, msgs []any) *recorder.Call {
		body := mustJSON(t, map[string]any{"model": "agent", "stream": true, "messages": msgs})
		if r := do(t, "POST", e.Proxy.URL+"/e/ep-lin/v1/chat/completions", map[string]string{"User-Agent": ua}, body); r.Status != 200 {
			t.Fatalf("%s: status %d", ua, r.Status)
		}
		return e.Sink.ForHarness(t, ua)
	}
	first := call("turn-1", msgs)
	var assistant map[string]any
	if err := json.Unmarshal([]byte(gjson.GetBytes(first.Response, "choices.0.message").Raw), &assistant); err != nil {
		t.Fatal(err)
	}
	msgs = append(msgs, assistant, map[string]any{"role": "user", "content": "and tomorrow?"})
	second := call("turn-2", msgs)
	retry := call("turn-2-again", msgs)

	if first.Lineage == nil || first.Lineage.Kind != recorder.LineageRoot {
		t.Fatalf("first call lineage %+v, want root", first.Lineage)
	}
	if l := second.Lineage; l == nil || l.Kind != recorder.LineageExtend || l.ParentCallID != first.CallID {
		t.Fatalf("second call lineage %+v, want extend of %s", l, first.CallID)
	}
	if l := retry.Lineage; l == nil || l.Kind != recorder.LineageRetry || l.ParentCallID != second.CallID {
		t.Fatalf("resent call lineage %+v, want retry of %s", l, second.CallID)
	}
	// A finished episode's state goes: the same resend is a root now.
	e.Handler.Forget("ep-lin")
	if l := call("after-forget", msgs).Lineage; l == nil || l.Kind != recorder.LineageRoot || l.ParentCallID != "" {
		t.Fatalf("call after Forget: lineage %+v, want root", l)
	}
}

// TestLineageOffByDefault: without live lineage the proxy classifies
// nothing: records carry no lineage (readers classify the stored episode)
// and the metric counts no call, also for a resend that live lineage would
// call a retry.
func TestLineageOffByDefault(t *testing.T) {
	script := &llmtest.Script{Turns: []llmtest.Turn{{Choice: llmtest.Choice{Content: llmtest.Pieces{"Sunny"}}}}}
	reg := prometheus.NewRegistry()
	e := proxytest.NewWith(t, llmtest.Options{Scripts: map[string]*llmtest.Script{"agent": script}},
		func(o *proxy.Options) { o.Registry = reg })
	body := mustJSON(t, map[string]any{"model": "agent", "messages": []any{map[string]any{"role": "user", "content": "Weather?"}}})
	for _, ua := range []string{"first", "resent"} {
		if r := do(t, "POST", e.Proxy.URL+"/e/ep-off/v1/chat/completions", map[string]string{"User-Agent": ua}, body); r.Status != 200 {
			t.Fatalf("%s: status %d", ua, r.Status)
		}
		if c := e.Sink.ForHarness(t, ua); c.Lineage != nil {
			t.Fatalf("%s: lineage %+v recorded without live lineage", ua, c.Lineage)
		}
	}
	e.Handler.Forget("ep-off") // nothing to forget; must not panic
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	requests := 0
	for _, mf := range mfs {
		switch mf.GetName() {
		case "orchard_proxy_lineage_total":
			t.Fatalf("orchard_proxy_lineage_total has %d series, want none", len(mf.GetMetric()))
		case "orchard_proxy_requests_total":
			requests = len(mf.GetMetric())
		}
	}
	if requests == 0 {
		t.Fatal("the registry has no orchard_proxy_requests_total series: the metrics were not observed at all")
	}
}
