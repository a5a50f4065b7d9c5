package proxy

import "testing"

func TestKindFromModels(t *testing.T) {
	tests := []struct {
		name, body string
		want       UpstreamKind
	}{
		{"vllm", `{"object":"list","data":[{"id":"m","object":"model","owned_by":"vllm","root":"m"}]}`, KindVLLM},
		{"sglang", `{"object":"list","data":[{"id":"m","object":"model","owned_by":"sglang"}]}`, KindSGLang},
		{"engine after an openai-owned model", `{"data":[{"id":"a","owned_by":"system"},{"id":"b","owned_by":"vllm"}]}`, KindVLLM},
		{"openai", `{"object":"list","data":[{"id":"gpt-4o","object":"model","created":1,"owned_by":"system"}]}`, KindOpenAI},
		{"openai fine-tune", `{"object":"list","data":[{"id":"ft:x","object":"model","owned_by":"org-abc"}]}`, KindOpenAI},
		{"anthropic", `{"data":[{"type":"model","id":"claude","display_name":"Claude","created_at":"2026-01-01T00:00:00Z"}],"has_more":false}`, KindAnthropic},
		{"llama.cpp", `{"object":"list","data":[{"id":"m","object":"model","owned_by":"llamacpp"}]}`, KindUnknown},
		{"empty list", `{"object":"list","data":[]}`, KindUnknown},
		{"no data", `{"models":["m"]}`, KindUnknown},
		{"not json", `<html>`, KindUnknown},
	}
	for _, tt := range tests {
		if got, evidence := kindFromModels([]byte(tt.body)); got != tt.want || evidence == "" {
			t.Errorf("%s: kindFromModels = %q (%q), want %q", tt.name, got, evidence, tt.want)
		}
	}
}
