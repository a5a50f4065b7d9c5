package llmtest

// Legacy completions. vLLM (serving_completion.py) dumps chunks with
// exclude_unset=False, so every choice field is present, null when unset;
// prompt_token_ids rides on each choice's first chunk and token_ids on every
// chunk when return_token_ids is set. Only a choice's content pieces are
// generated: completions have no reasoning or tool calls.

func (c *call) completionsTop() obj {
	return obj{{"id", c.id("cmpl-")}, {"object", "text_completion"}, {"created", c.created}, {"model", c.model}}
}

func (c *call) contentTokens(i int) []token {
	var out []token
	for _, tk := range c.t.choice(i).tokens(i) {
		if tk.kind == kindContent {
			out = append(out, tk)
		}
	}
	return out
}

// completionLogprobs is the legacy logprobs object for tks, whose text starts
// at offset.
func (c *call) completionLogprobs(tks []token, offset int) any {
	if !c.logprobs {
		return null
	}
	off := make([]int, len(tks))
	lps := make([]float64, len(tks))
	toks := make([]string, len(tks))
	top := make([]obj, len(tks))
	for i, tk := range tks {
		off[i], lps[i], toks[i] = offset, tk.logprob, tk.text
		offset += len(tk.text)
		t := obj{{tk.text, tk.logprob}}
		for j := 1; j <= c.topLogprobs; j++ {
			t = append(t, kv{"alt" + itoa(j), tk.logprob - float64(j)})
		}
		top[i] = t
	}
	return obj{{"text_offset", off}, {"token_logprobs", lps}, {"tokens", toks}, {"top_logprobs", top}}
}

func (c *call) completionsChoice(i int, text string, lp any, finish any, first bool, tks []token) obj {
	o := obj{{"index", i}, {"text", text}, {"logprobs", lp}, {"finish_reason", finish}}
	if c.profile() == ProfileOpenAI {
		return o
	}
	o = c.withPromptLogprobs(append(o, kv{"stop_reason", null}))
	return append(o,
		kv{"prompt_token_ids", orNull(c.tokenIDs && first, c.t.promptIDs(c.k))},
		kv{"token_ids", orNull(c.tokenIDs, ids(tks))})
}

func (c *call) completionsUsage() obj {
	p, _, _ := c.usage()
	n := 0
	for i := range c.n {
		n += len(c.contentTokens(i))
	}
	if c.profile() == ProfileOpenAI {
		return obj{{"prompt_tokens", p}, {"completion_tokens", n}, {"total_tokens", p + n}}
	}
	return obj{{"prompt_tokens", p}, {"total_tokens", p + n}, {"completion_tokens", n}}
}

func (c *call) completionsJSON() obj {
	choices := make([]obj, c.n)
	for i := range c.n {
		tks := c.contentTokens(i)
		choices[i] = c.completionsChoice(i, c.opt.echo+c.t.choice(i).Content.Text(),
			c.completionLogprobs(tks, 0), c.completionFinish(i), true, tks)
	}
	return append(c.completionsTop(), kv{"choices", choices}, kv{"usage", c.completionsUsage()})
}

func (c *call) completionFinish(i int) string {
	if f := c.t.choice(i).FinishReason; f == "length" {
		return f
	}
	return "stop"
}

func (c *call) completionsChunk(s *stream, choice obj) {
	o := append(c.completionsTop(), kv{"choices", []obj{choice}})
	switch {
	case c.opt.continuous:
		o = append(o, kv{"usage", c.chunkUsage()})
	case c.profile() != ProfileOpenAI || c.includeUsage:
		o = append(o, kv{"usage", null})
	}
	s.data(o)
}

func (c *call) completionsStream(s *stream) {
	toks := make([][]token, c.n)
	offs := make([]int, c.n)
	longest := 0
	for i := range c.n {
		toks[i] = c.contentTokens(i)
		longest = max(longest, len(toks[i]))
		if len(toks[i]) == 0 {
			c.completionsChunk(s, c.completionsChoice(i, c.opt.echo, null, c.completionFinish(i), true, nil))
		}
	}
	for j := range longest {
		for i := range c.n {
			if j >= len(toks[i]) {
				continue
			}
			tk := toks[i][j]
			finish := any(null)
			if j == len(toks[i])-1 {
				finish = c.completionFinish(i)
			}
			text := tk.text
			if j == 0 {
				text = c.opt.echo + text
			}
			c.opt.sent++
			c.completionsChunk(s, c.completionsChoice(i, text,
				c.completionLogprobs([]token{tk}, offs[i]), finish, j == 0, []token{tk}))
			offs[i] += len(tk.text)
		}
	}
	if c.includeUsage {
		s.data(append(c.completionsTop(), kv{"choices", []obj{}}, kv{"usage", c.completionsUsage()}))
	}
	s.event([]byte("data: [DONE]\n\n"))
}
