package llmtest

import (
	"strconv"

	"github.com/tidwall/gjson"
)

// Request options that change the shape of an answer beyond the basics of
// newCall, modelled on the engines' serving code:
//
//   - stream_options.continuous_usage_stats: usage on every chunk, counting
//     the completion tokens sent so far. vLLM honours it only together with
//     include_usage (should_include_usage); SGLang honours it alone; OpenAI
//     has no such option.
//   - echo (completions): the prompt string is prepended to each choice's
//     text, in a stream to its first chunk.
//   - prompt_logprobs (vLLM, non-streaming): a list with one entry per
//     prompt token, null for the first, at the top level in chat and in each
//     choice in completions. Only written when asked for.
type options struct {
	continuous     bool
	echo           string // the prompt to echo, "" for none
	promptLogprobs int    // -1: not asked
	sent           int    // completion tokens streamed so far (continuous usage)
}

func (c *call) readOptions(req gjson.Result) {
	cont := req.Get("stream_options.continuous_usage_stats").Bool()
	switch c.profile() {
	case ProfileVLLM:
		c.opt.continuous = cont && c.includeUsage
	case ProfileSGLang:
		c.opt.continuous = cont
	}
	if c.api == apiCompletions && req.Get("echo").Bool() {
		c.opt.echo = req.Get("prompt").String()
	}
	c.opt.promptLogprobs = -1
	if lp := req.Get("prompt_logprobs"); lp.Type == gjson.Number && c.profile() == ProfileVLLM && !c.stream {
		c.opt.promptLogprobs = int(lp.Int())
	}
}

// refusal is the engine's error message for a request it refuses, or "".
func (c *call) refusal() string {
	switch {
	case c.api == apiChat && c.stream && c.tokenIDs && c.profile() == ProfileSGLang:
		return "return_token_ids is not supported for streaming chat completions"
	case c.api == apiChat && c.profile() == ProfileVLLM && !c.logprobs && (c.topLogprobs > 0 || c.topLogprobs == -1):
		return "when using `top_logprobs`, `logprobs` must be set to true." // vLLM check_logprobs
	}
	return ""
}

// chunkUsage is the usage a chunk carries with continuous usage stats.
func (c *call) chunkUsage() obj {
	p := len(c.t.promptIDs(c.k))
	return obj{{"prompt_tokens", p}, {"total_tokens", p + c.opt.sent}, {"completion_tokens", c.opt.sent}}
}

// promptLogprobs is the prompt_logprobs list: null for the first prompt
// token, then {"<id>": {"logprob", "rank", "decoded_token"}} per token.
func (c *call) promptLogprobs() any {
	if c.opt.promptLogprobs < 0 {
		return nil
	}
	ids := c.t.promptIDs(c.k)
	out := make([]any, len(ids))
	out[0] = null
	for i := 1; i < len(ids); i++ {
		lp := -float64(i%5+1) * 0.25
		out[i] = obj{{strconv.FormatInt(ids[i], 10), obj{{"logprob", lp}, {"rank", 1},
			{"decoded_token", "p" + itoa(i)}}}}
	}
	return out
}

// withPromptLogprobs appends prompt_logprobs to o when asked for.
func (c *call) withPromptLogprobs(o obj) obj {
	if pl := c.promptLogprobs(); pl != nil {
		o = append(o, kv{"prompt_logprobs", pl})
	}
	return o
}
