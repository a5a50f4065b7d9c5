package assemble_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/orchard-rl/orchard/proxy/assemble"
	"github.com/orchard-rl/orchard/recorder"
)

func sseBody(lines ...string) []byte {
	return []byte(strings.Join(lines, "\n\n") + "\n\n")
}

func TestStreamCases(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, api string
		body      []byte
		response  string // "" skips the check
		done      bool
		err       string
		tokens    *recorder.Tokens
	}{
		{
			name: "sglang reasoning_content, unknown fields kept, crlf",
			api:  recorder.APIChatCompletions,
			body: []byte("data: {\"id\":\"a\",\"object\":\"chat.completion.chunk\",\"x_new\":1,\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"reasoning_content\":\"hm\"},\"matched_stop\":null}]}\r\n\r\n" +
				": ping\r\n\r\n" +
				"data: {\"id\":\"a\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\",\"reasoning_content\":null},\"finish_reason\":\"stop\",\"matched_stop\":151645}]}\r\n\r\n" +
				"data: [DONE]\r\n\r\n"),
			response: `{"id":"a","object":"chat.completion","x_new":1,"choices":[{"index":0,"message":{"role":"assistant","reasoning_content":"hm","content":"ok"},"matched_stop":151645,"finish_reason":"stop"}]}`,
			done:     true,
		},
		{
			name: "error chunk mid-stream",
			api:  recorder.APIChatCompletions,
			body: sseBody(`data: {"id":"a","choices":[{"index":0,"delta":{"content":"x"}}]}`,
				`data: {"error":{"message":"engine died","type":"InternalServerError","code":500}}`, `data: [DONE]`),
			response: `{"id":"a","choices":[{"index":0,"message":{"content":"x"}}]}`,
			done:     true, err: "engine died",
		},
		{
			name:     "malformed chunk, no terminal event",
			api:      recorder.APIChatCompletions,
			body:     sseBody(`data: {"id":"a","choices":[{"index":0,"delta":{"content":"x"}}]}`, `data: {oops`),
			response: `{"id":"a","choices":[{"index":0,"message":{"content":"x"}}]}`,
			err:      "malformed chunk 2",
		},
		{
			name: "ids and logprobs disagree",
			api:  recorder.APIChatCompletions,
			body: sseBody(`data: {"id":"a","choices":[{"index":0,"delta":{"content":"ab"},"logprobs":{"content":[{"token":"a","logprob":-1}]},"token_ids":[1,2]}],"prompt_token_ids":[7]}`,
				`data: [DONE]`),
			done: true,
			tokens: &recorder.Tokens{PromptIDs: []int32{7}, CompletionIDs: []int32{1, 2},
				Mismatch: "choice 0: a chunk has 2 token ids and 1 logprobs; choice 0: 2 token ids but 1 logprobs; logprobs dropped"},
		},
		{
			name: "usage disagrees with ids (ids lost by a parser)",
			api:  recorder.APIChatCompletions,
			body: sseBody(`data: {"id":"a","choices":[{"index":0,"delta":{"content":"ab"},"token_ids":[1]}],"prompt_token_ids":[7]}`,
				`data: {"id":"a","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":3,"total_tokens":4}}`, `data: [DONE]`),
			done: true,
			tokens: &recorder.Tokens{PromptIDs: []int32{7}, CompletionIDs: []int32{1},
				Mismatch: "usage reports 3 completion tokens but 1 token ids were sent"},
		},
		{
			name: "sglext ids",
			api:  recorder.APIChatCompletions,
			body: sseBody(`data: {"id":"a","choices":[{"index":0,"delta":{"content":"ab"}}]}`,
				`data: {"id":"a","choices":[],"sglext":{"input_ids":[5,6],"output_ids":[[8,9]]}}`, `data: [DONE]`),
			done:   true,
			tokens: &recorder.Tokens{PromptIDs: []int32{5, 6}, CompletionIDs: []int32{8, 9}},
		},
		{
			name: "tool name split, two calls interleaved",
			api:  recorder.APIChatCompletions,
			body: sseBody(`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"c2","type":"function","function":{"name":"b","arguments":"{"}}]}}]}`,
				`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"get_","arguments":""}}]}}]}`,
				`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"x","arguments":"{}"}},{"index":1,"function":{"arguments":"}"}}]}}]}`,
				`data: [DONE]`),
			response: `{"choices":[{"index":0,"message":{"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_x","arguments":"{}"}},{"id":"c2","type":"function","function":{"name":"b","arguments":"{}"}}]}}]}`,
			done:     true,
		},
		{
			name: "anthropic usage merge, error event",
			api:  recorder.APIMessages,
			body: sseBody("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}",
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"n\",\"input\":{}}}",
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\\\": \"}}",
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"1}\"}}",
				"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":9,\"input_tokens\":6}}",
				"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}"),
			response: `{"id":"m","content":[{"type":"tool_use","id":"t","name":"n","input":{"a":1}}],"stop_reason":"tool_use","usage":{"input_tokens":6,"output_tokens":9},"stop_sequence":null}`,
			err:      "Overloaded",
		},
		{
			name: "responses failed",
			api:  recorder.APIResponses,
			body: sseBody("event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\",\"status\":\"in_progress\",\"output\":[]}}",
				"event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"id\":\"r\",\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"boom\"},\"output\":[]}}"),
			response: `{"id":"r","status":"failed","error":{"code":"server_error","message":"boom"},"output":[]}`,
			done:     true, err: "boom",
		},
		{name: "empty body", api: recorder.APIMessages, body: nil},
		{name: "unknown api", api: "embeddings", body: []byte("data: x\n\n"), err: `assemble: unsupported api "embeddings"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := assemble.Stream(tc.api, tc.body)
			if tc.response != "" && !jsonEqual(t, got.Response, []byte(tc.response)) {
				t.Errorf("Response = %s, want %s", got.Response, tc.response)
			}
			if got.Done != tc.done || got.Err != tc.err {
				t.Errorf("Done, Err = %v, %q; want %v, %q", got.Done, got.Err, tc.done, tc.err)
			}
			if tc.tokens != nil && !reflect.DeepEqual(got.Tokens, tc.tokens) {
				t.Errorf("Tokens = %+v, want %+v", got.Tokens, tc.tokens)
			}
		})
	}
}

func TestJSONCases(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, api, body string
		want            assemble.Result
	}{
		{"vllm completions ids per choice", recorder.APICompletions,
			`{"model":"m","choices":[{"index":0,"text":"a","logprobs":{"token_logprobs":[-1,null]},"prompt_token_ids":[3],"token_ids":[4,5]}],"usage":{"completion_tokens":2}}`,
			assemble.Result{Model: "m", Usage: []byte(`{"completion_tokens":2}`), Done: true,
				Tokens: &recorder.Tokens{PromptIDs: []int32{3}, CompletionIDs: []int32{4, 5}, Logprobs: []float32{-1, -9999}}}},
		{"error object", recorder.APIChatCompletions, `{"error":{"message":"bad model","type":"invalid_request_error"}}`,
			assemble.Result{Done: true, Err: "bad model"}},
		{"anthropic error", recorder.APIMessages, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			assemble.Result{Done: true, Err: "Overloaded"}},
		{"not json", recorder.APIChatCompletions, `<html>502</html>`,
			assemble.Result{Response: []byte(`"\u003chtml\u003e502\u003c/html\u003e"`), Err: "response body is not valid JSON"}},
		{"json array", recorder.APIChatCompletions, `[1]`,
			assemble.Result{Response: []byte(`[1]`), Err: "response body is not a JSON object"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := assemble.JSON(tc.api, []byte(tc.body))
			if tc.want.Response == nil {
				tc.want.Response = []byte(tc.body)
			}
			if string(got.Response) != string(tc.want.Response) || string(got.Usage) != string(tc.want.Usage) ||
				got.Model != tc.want.Model || got.Done != tc.want.Done || got.Err != tc.want.Err ||
				!reflect.DeepEqual(got.Tokens, tc.want.Tokens) {
				t.Errorf("JSON() = %+v %+v, want %+v %+v", got, got.Tokens, tc.want, tc.want.Tokens)
			}
		})
	}
}
