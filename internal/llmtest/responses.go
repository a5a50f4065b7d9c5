package llmtest

import "github.com/tidwall/gjson"

// The Responses API (OpenAI). Events are named SSE events ("event: <type>")
// whose data repeats the type and carries a sequence_number; the stream opens
// with response.created and response.in_progress, builds each output item
// between response.output_item.added and .done, and ends with
// response.completed (or response.incomplete) holding the full response, which
// is also the non-streaming body. Event and field names follow the openai-go
// SDK's Response*Event types.

func (c *call) itemID(prefix string, i int) string {
	return prefix + "_llmtest-" + c.s.Name + "-" + itoa(c.k) + "-" + itoa(i)
}

func (c *call) responseUsage() obj {
	p, n, r := c.usage()
	return obj{{"input_tokens", p}, {"input_tokens_details", obj{{"cached_tokens", 0}}},
		{"output_tokens", n}, {"output_tokens_details", obj{{"reasoning_tokens", r}}}, {"total_tokens", p + n}}
}

func rawOr(v gjson.Result, def any) any {
	if !v.Exists() {
		return def
	}
	return raw(v.Raw)
}

// finalStatus is "completed", or "incomplete" for a length-limited turn.
func (c *call) finalStatus() string {
	if c.t.choice(0).FinishReason == "length" {
		return "incomplete"
	}
	return "completed"
}

// responseObject is the response in the given status; full includes the
// output items and usage.
func (c *call) responseObject(status string, full bool) obj {
	if status == "completed" {
		status = c.finalStatus()
	}
	incomplete := any(null)
	if status == "incomplete" {
		incomplete = obj{{"reason", "max_output_tokens"}}
	}
	output, usage := []obj{}, any(null)
	if full {
		output, usage = c.outputItems(), c.responseUsage()
	}
	return obj{{"id", c.id("resp_")}, {"object", "response"}, {"created_at", c.created},
		{"status", status}, {"background", false}, {"error", null}, {"incomplete_details", incomplete},
		{"instructions", rawOr(c.req.Get("instructions"), null)}, {"max_output_tokens", rawOr(c.req.Get("max_output_tokens"), null)},
		{"model", c.model}, {"output", output}, {"parallel_tool_calls", true},
		{"previous_response_id", rawOr(c.req.Get("previous_response_id"), null)},
		{"reasoning", obj{{"effort", rawOr(c.req.Get("reasoning.effort"), null)}, {"summary", null}}},
		{"store", rawOr(c.req.Get("store"), true)}, {"temperature", raw("1.0")},
		{"text", obj{{"format", obj{{"type", "text"}}}}}, {"tool_choice", rawOr(c.req.Get("tool_choice"), "auto")},
		{"tools", rawOr(c.req.Get("tools"), []obj{})}, {"top_p", raw("1.0")}, {"truncation", "disabled"},
		{"usage", usage}, {"user", null}, {"metadata", obj{}}}
}

// item kinds in output order.
func (c *call) outputItems() []obj {
	ch := c.t.choice(0)
	var out []obj
	if len(ch.Reasoning) > 0 || ch.EncryptedReasoning != "" {
		out = append(out, c.reasoningItem(len(out), ch.Reasoning.Text(), true))
	}
	if len(ch.Content) > 0 {
		out = append(out, c.messageItem(len(out), ch.Content.Text(), true))
	}
	for _, tc := range ch.ToolCalls {
		out = append(out, c.functionItem(len(out), tc, tc.Arguments.Text(), true))
	}
	return out
}

func (c *call) reasoningItem(i int, text string, done bool) obj {
	o := obj{{"id", c.itemID("rs", i)}, {"type", "reasoning"}, {"summary", []obj{}}}
	if !done {
		return o
	}
	if text != "" {
		o[2].v = []obj{{{"type", "summary_text"}, {"text", text}}}
	}
	if enc := c.t.choice(0).EncryptedReasoning; c.encrypted && enc != "" {
		o = append(o, kv{"encrypted_content", enc})
	}
	return o
}

func outputText(text string) obj {
	return obj{{"type", "output_text"}, {"annotations", []obj{}}, {"logprobs", []obj{}}, {"text", text}}
}

func (c *call) messageItem(i int, text string, done bool) obj {
	status, content := "in_progress", []obj{}
	if done {
		status, content = "completed", []obj{outputText(text)}
	}
	return obj{{"id", c.itemID("msg", i)}, {"type", "message"}, {"status", status}, {"content", content}, {"role", "assistant"}}
}

func (c *call) functionItem(i int, tc ToolCall, args string, done bool) obj {
	status := "in_progress"
	if done {
		status = "completed"
	}
	return obj{{"id", c.itemID("fc", i)}, {"type", "function_call"}, {"status", status},
		{"arguments", args}, {"call_id", tc.ID}, {"name", tc.Name}}
}

// rstream numbers Responses events.
type rstream struct {
	s   *stream
	seq int
}

func (r *rstream) ev(typ string, fields ...kv) {
	o := append(obj{{"type", typ}}, fields...)
	o = append(o, kv{"sequence_number", r.seq})
	r.seq++
	r.s.named(typ, o)
}

func (c *call) responsesStream(s *stream) {
	r := &rstream{s: s}
	r.ev("response.created", kv{"response", c.responseObject("in_progress", false)})
	r.ev("response.in_progress", kv{"response", c.responseObject("in_progress", false)})
	ch := c.t.choice(0)
	oi := 0
	if len(ch.Reasoning) > 0 || ch.EncryptedReasoning != "" {
		c.streamReasoning(r, oi, ch)
		oi++
	}
	if len(ch.Content) > 0 {
		c.streamMessage(r, oi, ch)
		oi++
	}
	for _, tc := range ch.ToolCalls {
		c.streamFunction(r, oi, tc)
		oi++
	}
	status := c.finalStatus()
	r.ev("response."+status, kv{"response", c.responseObject(status, true)})
}

func (c *call) streamReasoning(r *rstream, oi int, ch *Choice) {
	id := c.itemID("rs", oi)
	r.ev("response.output_item.added", kv{"output_index", oi}, kv{"item", c.reasoningItem(oi, "", false)})
	if len(ch.Reasoning) > 0 {
		loc := []kv{{"item_id", id}, {"output_index", oi}, {"summary_index", 0}}
		r.ev("response.reasoning_summary_part.added", append(loc, kv{"part", obj{{"type", "summary_text"}, {"text", ""}}})...)
		for _, p := range ch.Reasoning {
			r.ev("response.reasoning_summary_text.delta", append(loc, kv{"delta", p})...)
		}
		text := ch.Reasoning.Text()
		r.ev("response.reasoning_summary_text.done", append(loc, kv{"text", text})...)
		r.ev("response.reasoning_summary_part.done", append(loc, kv{"part", obj{{"type", "summary_text"}, {"text", text}}})...)
	}
	r.ev("response.output_item.done", kv{"output_index", oi}, kv{"item", c.reasoningItem(oi, ch.Reasoning.Text(), true)})
}

func (c *call) streamMessage(r *rstream, oi int, ch *Choice) {
	id := c.itemID("msg", oi)
	r.ev("response.output_item.added", kv{"output_index", oi}, kv{"item", c.messageItem(oi, "", false)})
	loc := []kv{{"item_id", id}, {"output_index", oi}, {"content_index", 0}}
	r.ev("response.content_part.added", append(loc, kv{"part", outputText("")})...)
	for _, p := range ch.Content {
		r.ev("response.output_text.delta", append(loc, kv{"delta", p}, kv{"logprobs", []obj{}})...)
	}
	text := ch.Content.Text()
	r.ev("response.output_text.done", append(loc, kv{"text", text}, kv{"logprobs", []obj{}})...)
	r.ev("response.content_part.done", append(loc, kv{"part", outputText(text)})...)
	r.ev("response.output_item.done", kv{"output_index", oi}, kv{"item", c.messageItem(oi, text, true)})
}

func (c *call) streamFunction(r *rstream, oi int, tc ToolCall) {
	id := c.itemID("fc", oi)
	r.ev("response.output_item.added", kv{"output_index", oi}, kv{"item", c.functionItem(oi, tc, "", false)})
	loc := []kv{{"item_id", id}, {"output_index", oi}}
	for _, p := range tc.Arguments {
		r.ev("response.function_call_arguments.delta", append(loc, kv{"delta", p})...)
	}
	args := tc.Arguments.Text()
	r.ev("response.function_call_arguments.done", append(loc, kv{"arguments", args})...)
	r.ev("response.output_item.done", kv{"output_index", oi}, kv{"item", c.functionItem(oi, tc, args, true)})
}
