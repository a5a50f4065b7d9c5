// Package llmtest is a scripted upstream LLM server for tests and benchmarks:
// it stands in for vLLM, SGLang, OpenAI and Anthropic and speaks their wire
// formats byte for byte deterministically.
//
// Start one with
//
//	srv := llmtest.NewServer(llmtest.Options{}) // scripts from <module>/testdata/llm
//	defer srv.Close()
//	base := srv.URL() + "/v1"
//
// It serves POST /v1/chat/completions, /v1/completions, /v1/responses,
// /v1/messages (query strings such as ?beta=true are accepted),
// /v1/messages/count_tokens and /v1/embeddings, and GET /v1/models (in the
// format of the server named by [Options.Server], so that clients can
// detect it). Use
// [NewHandler] to mount the [Handler] elsewhere.
//
// # Scripts
//
// A request's "model" names the script (testdata/llm/NAME.json; header
// X-Llmtest-Script overrides; unknown names fall back to "default"). Turn k of
// the script answers a request whose history already holds k assistant turns
// (header X-Llmtest-Turn overrides). A turn lists the reasoning, content and
// tool calls of a generation as pieces: each piece is one token and one stream
// delta, so the chunking and the token ids line up exactly:
//
//	{"profile": "vllm",
//	 "turns": [{"prompt_token_ids": [1, 2],
//	            "reasoning": ["Let", " me see"],
//	            "content": ["Hi", "!"],
//	            "tool_calls": [{"id": "call_1", "name": "f", "arguments": ["{\"a\":", "1}"]}],
//	            "token_ids": [11, 12, 13, 14, 15, 16], "logprobs": [...],
//	            "finish_reason": "stop"}]}
//
// See [Script], [Turn] and [Choice] for every field. Ids, timestamps and
// generated token ids/logprobs are fixed, so output is reproducible.
//
// # Request fields honoured
//
// stream; stream_options.include_usage (vLLM: a final "choices":[] usage
// chunk; OpenAI: additionally "usage":null on every chunk); vLLM/SGLang
// return_token_ids (prompt_token_ids and token_ids only when asked); logprobs
// and top_logprobs (chat) or logprobs:N (completions), only when asked; n;
// stream_options.continuous_usage_stats (usage on every chunk: vLLM only
// with include_usage, SGLang alone); echo (completions: the prompt leads the
// text); vLLM prompt_logprobs (non-streaming); Responses
// include:["reasoning.encrypted_content"]. The profile picks the
// dialect: vllm ("reasoning", exclude_unset chunks), openai (no reasoning
// text, usage:null chunks, service_tier and system_fingerprint) or sglang
// ("reasoning_content", per-choice ids, return_token_ids refused when
// streaming).
//
// # Faults
//
// A script's "fault" or the X-Llmtest-Fault header (which wins) takes a
// comma-separated spec: status=503 (realistic error body per API),
// reset_after=N (TCP reset after N events), hang_after=N (hold until the
// request is canceled), eof_after=N (clean end without the terminal event),
// first_byte_delay=D and chunk_delay=D (Go durations).
//
// # Assertions
//
// [Handler.Requests] returns every request as received (method, path, query,
// headers, raw body, script, turn, canceled). [Handler.WaitRequests] waits for
// arrivals and [Handler.Canceled] delivers requests whose context ended before
// their response did: the upstream "saw the cancel".
package llmtest
