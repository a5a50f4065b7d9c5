package llmtest

import (
	"bytes"
	"encoding/json"
)

// Anthropic messages. The stream is message_start (the message with empty
// content), a ping, then per content block content_block_start /
// content_block_delta (text_delta, thinking_delta, signature_delta,
// input_json_delta) / content_block_stop, then message_delta (stop_reason and
// cumulative usage) and message_stop. Every event is a named SSE event whose
// data repeats the type.

const defaultSignature = "EqQBCgIYAhIMllmtestSignature=="

func (c *call) stopReason() string {
	ch := c.t.choice(0)
	switch {
	case ch.FinishReason == "length":
		return "max_tokens"
	case len(ch.ToolCalls) > 0:
		return "tool_use"
	}
	return "end_turn"
}

func (c *call) signature() string {
	if s := c.t.choice(0).EncryptedReasoning; s != "" {
		return s
	}
	return defaultSignature
}

func (c *call) messageUsage(output int) obj {
	p, _, _ := c.usage()
	return obj{{"input_tokens", p}, {"cache_creation_input_tokens", 0}, {"cache_read_input_tokens", 0},
		{"output_tokens", output}, {"service_tier", "standard"}}
}

func (c *call) messageHead(content any, stop any, output int) obj {
	return obj{{"id", c.id("msg_")}, {"type", "message"}, {"role", "assistant"}, {"model", c.model},
		{"content", content}, {"stop_reason", stop}, {"stop_sequence", null}, {"usage", c.messageUsage(output)}}
}

// compactJSON compacts a tool call's argument text (validated at load).
func compactJSON(s string) raw {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		return raw("{}")
	}
	return raw(b.String())
}

func (c *call) blocks() []obj {
	ch := c.t.choice(0)
	var out []obj
	for _, d := range ch.RedactedThinking {
		out = append(out, obj{{"type", "redacted_thinking"}, {"data", d}})
	}
	if len(ch.Reasoning) > 0 {
		out = append(out, obj{{"type", "thinking"}, {"thinking", ch.Reasoning.Text()}, {"signature", c.signature()}})
	}
	if len(ch.Content) > 0 {
		out = append(out, obj{{"type", "text"}, {"text", ch.Content.Text()}})
	}
	for _, tc := range ch.ToolCalls {
		out = append(out, obj{{"type", "tool_use"}, {"id", tc.ID}, {"name", tc.Name}, {"input", compactJSON(tc.Arguments.Text())}})
	}
	return out
}

func (c *call) messageJSON() obj {
	_, n, _ := c.usage()
	return c.messageHead(c.blocks(), c.stopReason(), n)
}

func (c *call) messagesStream(s *stream) {
	s.named("message_start", obj{{"type", "message_start"}, {"message", c.messageHead([]obj{}, null, 1)}})
	s.event([]byte("event: ping\ndata: {\"type\": \"ping\"}\n\n"))
	ch := c.t.choice(0)
	b := 0
	block := func(start obj, deltas []obj) {
		s.named("content_block_start", obj{{"type", "content_block_start"}, {"index", b}, {"content_block", start}})
		for _, d := range deltas {
			s.named("content_block_delta", obj{{"type", "content_block_delta"}, {"index", b}, {"delta", d}})
		}
		s.named("content_block_stop", obj{{"type", "content_block_stop"}, {"index", b}})
		b++
	}
	for _, d := range ch.RedactedThinking {
		block(obj{{"type", "redacted_thinking"}, {"data", d}}, nil)
	}
	if len(ch.Reasoning) > 0 {
		ds := deltas("thinking_delta", "thinking", ch.Reasoning)
		ds = append(ds, obj{{"type", "signature_delta"}, {"signature", c.signature()}})
		block(obj{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}, ds)
	}
	if len(ch.Content) > 0 {
		block(obj{{"type", "text"}, {"text", ""}}, deltas("text_delta", "text", ch.Content))
	}
	for _, tc := range ch.ToolCalls {
		block(obj{{"type", "tool_use"}, {"id", tc.ID}, {"name", tc.Name}, {"input", obj{}}},
			deltas("input_json_delta", "partial_json", tc.Arguments))
	}
	_, n, _ := c.usage()
	s.named("message_delta", obj{{"type", "message_delta"},
		{"delta", obj{{"stop_reason", c.stopReason()}, {"stop_sequence", null}}},
		{"usage", obj{{"output_tokens", n}}}})
	s.named("message_stop", obj{{"type", "message_stop"}})
}

func deltas(typ, key string, ps Pieces) []obj {
	out := make([]obj, len(ps))
	for i, p := range ps {
		out[i] = obj{{"type", typ}, {key, p}}
	}
	return out
}
