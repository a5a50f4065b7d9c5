// Package assemble turns a recorded model response back into one JSON object
// equal to what the API returns without streaming, and extracts usage, model
// and the engine's token ids from it.
//
// [Stream] takes an SSE body as the upstream sent it (already decoded from any
// Content-Encoding) and reassembles it per API:
//
//   - chat.completions and completions: choices by "index"; content,
//     reasoning ("reasoning", or "reasoning_content" for SGLang and older
//     vLLM), refusal and text concatenated; tool calls assembled by their
//     "index" (parallel calls) from argument fragments; logprob arrays
//     concatenated; the usage chunk ("choices":[]) kept; vLLM's
//     prompt_token_ids and per-chunk token_ids collected. The stream is done
//     at "data: [DONE]".
//   - responses: the response.completed/.failed/.incomplete snapshot when
//     present, otherwise a response rebuilt from output_item, content_part,
//     output_text, reasoning and function_call_arguments events by
//     output_index.
//   - messages: message_start's message with content blocks rebuilt by index
//     (text_delta, thinking_delta, signature_delta, input_json_delta) and
//     message_delta's stop reason and usage merged. Done at message_stop.
//
// Fields assembly does not know are kept (the last non-null value wins), so a
// new upstream field survives into the record. A stream cut short still yields
// the partial response with Done false. [JSON] handles non-streaming bodies.
//
// Token ids (recorder.Tokens) come from vLLM's prompt_token_ids (top-level for
// chat, per choice for completions) and choices[].token_ids, or from SGLang's
// per-choice fields or sglext.input_ids/output_ids; logprobs are aligned with
// the completion ids one-to-one, or dropped with Tokens.Mismatch explaining
// the disagreement. Nothing here panics on any input.
package assemble
