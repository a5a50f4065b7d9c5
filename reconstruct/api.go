package reconstruct

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/orchard-rl/orchard/recorder"
)

const (
	apiChat        = recorder.APIChatCompletions
	apiCompletions = recorder.APICompletions
	apiResponses   = recorder.APIResponses
	apiMessages    = recorder.APIMessages
)

// ErrUnsupportedAPI is returned for calls whose API carries no
// conversation (embeddings, model listings, token counts).
var ErrUnsupportedAPI = errors.New("api carries no conversation")

type codec struct {
	decode     func([]byte) (*Conversation, error)
	completion func([]byte) ([]Message, error)
}

var codecs = map[recorder.API]codec{
	apiChat:        {decodeChatRequest, decodeChatCompletion},
	apiCompletions: {decodeCompletionsRequest, decodeCompletionsCompletion},
	apiResponses:   {decodeResponsesRequest, decodeResponsesCompletion},
	apiMessages:    {decodeMessagesRequest, decodeMessagesCompletion},
}

// Supported reports whether calls of api can be reconstructed.
func Supported(api recorder.API) bool {
	_, ok := codecs[api]
	return ok
}

// ErrInvalidJSON is returned for bodies that are not valid JSON.
var ErrInvalidJSON = errors.New("invalid JSON")

// DecodeRequest decodes a request body of api (a recorder API name) into
// its canonical conversation. The result shares memory with body, which
// must not be modified while the result is in use.
func DecodeRequest(api recorder.API, body []byte) (*Conversation, error) {
	c, ok := codecs[api]
	if !ok {
		return nil, fmt.Errorf("%s: %w", api, ErrUnsupportedAPI)
	}
	if !json.Valid(body) {
		return nil, fmt.Errorf("decode %s request: %w", api, ErrInvalidJSON)
	}
	conv, err := c.decode(body)
	if err != nil {
		return nil, fmt.Errorf("decode %s request: %w", api, err)
	}
	return conv, nil
}

// DecodeCompletion returns the messages the model generated, read from a
// non-streaming response object of api: the assistant message of choice 0
// (chat), the choice's text (completions), the output items (Responses),
// or the message (Anthropic).
func DecodeCompletion(api recorder.API, response []byte) ([]Message, error) {
	c, ok := codecs[api]
	if !ok {
		return nil, fmt.Errorf("%s: %w", api, ErrUnsupportedAPI)
	}
	if !json.Valid(response) {
		return nil, fmt.Errorf("decode %s response: %w", api, ErrInvalidJSON)
	}
	msgs, err := c.completion(response)
	if err != nil {
		return nil, fmt.Errorf("decode %s response: %w", api, err)
	}
	return msgs, nil
}
