package llmtest

// Chat completions in three dialects. vLLM (serving_chat.py) writes chunks
// with pydantic exclude_unset: fields passed explicitly appear even when null
// ("logprobs", "token_ids", "prompt_token_ids"), the role chunk carries the
// prompt ids, the last token's chunk carries finish_reason and stop_reason,
// and with include_usage one chunk with "choices":[] and the usage precedes
// [DONE]. OpenAI sends "usage":null on every chunk when include_usage is set,
// a separate finish chunk with an empty delta, and no reasoning text.

// reasoningKey is the delta/message field for reasoning text.
func (c *call) reasoningKey() string {
	switch c.profile() {
	case ProfileSGLang:
		return "reasoning_content"
	case ProfileOpenAI:
		return ""
	}
	return "reasoning"
}

// visible filters out tokens the dialect does not show (OpenAI hides reasoning).
func (c *call) visible(tks []token) []token {
	if c.reasoningKey() != "" {
		return tks
	}
	out := make([]token, 0, len(tks))
	for _, tk := range tks {
		if tk.kind != kindReasoning {
			out = append(out, tk)
		}
	}
	return out
}

func (c *call) chatTop(object string) obj {
	o := obj{{"id", c.id("chatcmpl-")}, {"object", object}, {"created", c.created}, {"model", c.model}}
	if c.profile() == ProfileOpenAI {
		o = append(o, kv{"service_tier", "default"}, kv{"system_fingerprint", "fp_llmtest"})
	}
	return o
}

// chatLogprob is one entry of logprobs.content.
func (c *call) chatLogprob(tk token) obj {
	top := make([]obj, 0, c.topLogprobs)
	for j := range c.topLogprobs {
		t, lp := tk.text, tk.logprob
		if j > 0 {
			t, lp = "alt"+itoa(j), tk.logprob-float64(j)
		}
		top = append(top, obj{{"token", t}, {"logprob", lp}, {"bytes", utf8Bytes(t)}})
	}
	return obj{{"token", tk.text}, {"logprob", tk.logprob}, {"bytes", utf8Bytes(tk.text)}, {"top_logprobs", top}}
}

func (c *call) chatLogprobs(tks []token) any {
	if !c.logprobs {
		return null
	}
	entries := make([]obj, len(tks))
	for i, tk := range tks {
		entries[i] = c.chatLogprob(tk)
	}
	o := obj{{"content", entries}}
	if c.profile() == ProfileOpenAI {
		o = append(o, kv{"refusal", null})
	}
	return o
}

func (c *call) chatUsage() obj {
	p, n, r := c.usage()
	if c.profile() == ProfileOpenAI {
		return obj{{"prompt_tokens", p}, {"completion_tokens", n}, {"total_tokens", p + n},
			{"prompt_tokens_details", obj{{"cached_tokens", 0}, {"audio_tokens", 0}}},
			{"completion_tokens_details", obj{{"reasoning_tokens", r}, {"audio_tokens", 0},
				{"accepted_prediction_tokens", 0}, {"rejected_prediction_tokens", 0}}}}
	}
	return obj{{"prompt_tokens", p}, {"total_tokens", p + n}, {"completion_tokens", n}}
}

func (c *call) chatMessage(ch *Choice) obj {
	content := any(ch.Content.Text())
	if ch.Content.Text() == "" && len(ch.ToolCalls) > 0 {
		content = null
	}
	m := obj{{"role", "assistant"}, {"content", content}}
	if c.profile() == ProfileOpenAI {
		m = append(m, kv{"refusal", null})
	}
	if k := c.reasoningKey(); k != "" && ch.Reasoning.Text() != "" {
		m = append(m, kv{k, ch.Reasoning.Text()})
	}
	if len(ch.ToolCalls) > 0 {
		tcs := make([]obj, len(ch.ToolCalls))
		for i, tc := range ch.ToolCalls {
			tcs[i] = obj{{"id", tc.ID}, {"type", "function"},
				{"function", obj{{"name", tc.Name}, {"arguments", tc.Arguments.Text()}}}}
		}
		m = append(m, kv{"tool_calls", tcs})
	}
	return m
}

// chatJSON is the non-streaming response.
func (c *call) chatJSON() obj {
	choices := make([]obj, c.n)
	for i := range c.n {
		ch := c.t.choice(i)
		tks := c.visible(ch.tokens(i))
		co := obj{{"index", i}, {"message", c.chatMessage(ch)}, {"logprobs", c.chatLogprobs(tks)},
			{"finish_reason", ch.finish()}}
		switch c.profile() {
		case ProfileVLLM:
			co = append(co, kv{"stop_reason", null}, kv{"token_ids", orNull(c.tokenIDs, ids(tks))})
		case ProfileSGLang:
			if c.tokenIDs {
				co = append(co, kv{"prompt_token_ids", c.t.promptIDs(c.k)}, kv{"token_ids", ids(tks)})
			}
		}
		choices[i] = co
	}
	o := c.withPromptLogprobs(append(c.chatTop("chat.completion"), kv{"choices", choices}, kv{"usage", c.chatUsage()}))
	if c.profile() == ProfileVLLM {
		o = append(o, kv{"prompt_token_ids", orNull(c.tokenIDs, c.t.promptIDs(c.k))})
	}
	return o
}

func ids(tks []token) []int64 {
	out := make([]int64, len(tks))
	for i, tk := range tks {
		out[i] = tk.id
	}
	return out
}

// chatChunk writes one chunk holding one choice.
func (c *call) chatChunk(s *stream, choice obj, extra ...kv) {
	o := append(c.chatTop("chat.completion.chunk"), kv{"choices", []obj{choice}})
	switch {
	case c.opt.continuous:
		o = append(o, kv{"usage", c.chunkUsage()})
	case c.includeUsage && c.profile() == ProfileOpenAI:
		o = append(o, kv{"usage", null})
	}
	s.data(append(o, extra...))
}

// chatStream writes the streaming response.
func (c *call) chatStream(s *stream) {
	openai := c.profile() == ProfileOpenAI
	toks := make([][]token, c.n)
	for i := range c.n {
		toks[i] = c.visible(c.t.choice(i).tokens(i))
		delta := obj{{"role", "assistant"}, {"content", ""}}
		var extra []kv
		if openai {
			delta = append(delta, kv{"refusal", null})
		} else if c.profile() == ProfileVLLM {
			extra = []kv{{"prompt_token_ids", orNull(c.tokenIDs, c.t.promptIDs(c.k))}}
		}
		c.chatChunk(s, obj{{"index", i}, {"delta", delta}, {"logprobs", null}, {"finish_reason", null}}, extra...)
	}
	longest := 0
	for i := range c.n {
		longest = max(longest, len(toks[i]))
		if len(toks[i]) == 0 && !openai {
			c.chatChunk(s, c.tokenChoice(i, obj{}, nil, true))
		}
	}
	for j := range longest {
		for i := range c.n {
			if j < len(toks[i]) {
				c.chatToken(s, i, toks[i], j)
			}
		}
	}
	if openai {
		for i := range c.n {
			c.chatChunk(s, obj{{"index", i}, {"delta", obj{}}, {"logprobs", null}, {"finish_reason", c.t.choice(i).finish()}})
		}
	}
	if c.includeUsage {
		s.data(append(c.chatTop("chat.completion.chunk"), kv{"choices", []obj{}}, kv{"usage", c.chatUsage()}))
	}
	s.event([]byte("data: [DONE]\n\n"))
}

// chatToken writes the chunk of token j of choice i.
func (c *call) chatToken(s *stream, i int, tks []token, j int) {
	tk := tks[j]
	ch := c.t.choice(i)
	var delta obj
	switch {
	case tk.kind == kindReasoning:
		delta = obj{{c.reasoningKey(), tk.text}}
	case tk.kind == kindContent:
		delta = obj{{"content", tk.text}}
	default:
		tc := ch.ToolCalls[tk.kind]
		first := j == 0 || tks[j-1].kind != tk.kind
		if first && c.profile() == ProfileOpenAI {
			c.chatChunk(s, obj{{"index", i}, {"delta", obj{{"tool_calls", []obj{{{"index", tk.kind},
				{"id", tc.ID}, {"type", "function"}, {"function", obj{{"name", tc.Name}, {"arguments", ""}}}}}}}},
				{"logprobs", null}, {"finish_reason", null}})
			first = false
		}
		call := obj{{"index", tk.kind}, {"function", obj{{"arguments", tk.text}}}}
		if first {
			call = obj{{"id", tc.ID}, {"type", "function"}, {"index", tk.kind},
				{"function", obj{{"name", tc.Name}, {"arguments", tk.text}}}}
		}
		delta = obj{{"tool_calls", []obj{call}}}
	}
	last := j == len(tks)-1 && c.profile() != ProfileOpenAI
	c.opt.sent++
	c.chatChunk(s, c.tokenChoice(i, delta, &tk, last))
}

// tokenChoice is the choice object of a token chunk (tk nil: no token).
func (c *call) tokenChoice(i int, delta obj, tk *token, last bool) obj {
	lp := any(null)
	var tids []int64
	if tk != nil {
		if c.logprobs {
			lp = c.chatLogprobs([]token{*tk})
		}
		tids = []int64{tk.id}
	}
	o := obj{{"index", i}, {"delta", delta}, {"logprobs", lp}, {"finish_reason", null}}
	if last {
		o[3].v = c.t.choice(i).finish()
		if c.profile() == ProfileVLLM {
			o = append(o, kv{"stop_reason", null})
		}
	}
	if c.profile() == ProfileVLLM {
		o = append(o, kv{"token_ids", orNull(c.tokenIDs, tids)})
	}
	return o
}
