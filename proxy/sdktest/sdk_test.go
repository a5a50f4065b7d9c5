// Package sdktest checks the recording proxy against the official OpenAI and
// Anthropic Go SDKs: their requests pass through unchanged and their
// streams parse as they would against the provider.
package sdktest

import (
	"context"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/orchard-rl/orchard/proxy/proxytest"
	"github.com/orchard-rl/orchard/recorder"
)

// TestOfficialClients drives the official Go SDKs through the proxy, with
// nothing but a base URL changed, and checks each call is recorded under
// the episode in that URL.
func TestOfficialClients(t *testing.T) {
	e := proxytest.New(t, nil)
	ctx := context.Background()
	oc := openai.NewClient(option.WithBaseURL(e.Proxy.URL+"/e/ep-sdk/v1/"), option.WithAPIKey("sk-client"),
		option.WithHeader("User-Agent", "openai-go-test"), option.WithMaxRetries(0))
	ac := anthropic.NewClient(aoption.WithBaseURL(e.Proxy.URL+"/e/ep-sdk/"), aoption.WithAPIKey("sk-ant-client"),
		aoption.WithHeader("User-Agent", "anthropic-go-test"), aoption.WithMaxRetries(0))

	chatParams := openai.ChatCompletionNewParams{Model: "tools",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather?")}}
	msgParams := anthropic.MessageNewParams{Model: "tools", MaxTokens: 1024,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is the weather?"))}}

	tests := []struct {
		name   string
		ua     string
		api    recorder.API
		stream bool
		call   func(t *testing.T)
	}{
		{"chat", "openai-go-test", recorder.APIChatCompletions, false, func(t *testing.T) {
			res, err := oc.Chat.Completions.New(ctx, chatParams)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(res.Choices[0].Message.ToolCalls); n != 2 {
				t.Fatalf("tool calls = %d, want 2", n)
			}
		}},
		{"chat stream", "openai-go-test", recorder.APIChatCompletions, true, func(t *testing.T) {
			s := oc.Chat.Completions.NewStreaming(ctx, chatParams)
			var acc openai.ChatCompletionAccumulator
			for s.Next() {
				acc.AddChunk(s.Current())
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
			if n := len(acc.Choices[0].Message.ToolCalls); n != 2 {
				t.Fatalf("tool calls = %d, want 2", n)
			}
		}},
		{"responses", "openai-go-test", recorder.APIResponses, false, func(t *testing.T) {
			res, err := oc.Responses.New(ctx, responses.ResponseNewParams{Model: "tools",
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("What is the weather?")}})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Output) == 0 {
				t.Fatal("no output items")
			}
		}},
		{"messages", "anthropic-go-test", recorder.APIMessages, false, func(t *testing.T) {
			res, err := ac.Messages.New(ctx, msgParams)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Content) == 0 {
				t.Fatal("no content blocks")
			}
		}},
		{"messages stream", "anthropic-go-test", recorder.APIMessages, true, func(t *testing.T) {
			s := ac.Messages.NewStreaming(ctx, msgParams)
			var msg anthropic.Message
			for s.Next() {
				if err := msg.Accumulate(s.Current()); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
			if len(msg.Content) == 0 {
				t.Fatal("no content blocks")
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.call(t)
			c := e.Sink.ForHarness(t, tt.ua)
			if c.EpisodeID != "ep-sdk" || c.API != tt.api || c.Stream != tt.stream || c.Status != 200 || c.EndReason != recorder.EndDone {
				t.Fatalf("record: episode %q api %q stream %v status %d end %q", c.EpisodeID, c.API, c.Stream, c.Status, c.EndReason)
			}
		})
	}
}
