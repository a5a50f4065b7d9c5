package reconstruct

import (
	"encoding/json"
	"fmt"

	"github.com/orchard-rl/orchard/recorder"
)

// The encoders write a [Conversation] back as a request body. They are the
// round-trip oracle of the decoders (a decoded request encodes to the same
// JSON document, so decoding lost nothing), and nothing else needs them,
// so they live with the tests.

// encoders holds the request encoder of each API [DecodeRequest] decodes.
var encoders = map[recorder.API]func(*Conversation) (json.RawMessage, error){
	apiChat:        encodeChatRequest,
	apiCompletions: encodeCompletionsRequest,
	apiResponses:   encodeResponsesRequest,
	apiMessages:    encodeMessagesRequest,
}

// encodeRequest writes conv back as a request body of conv.API. For a
// conversation returned by [DecodeRequest] the result is the same JSON
// document as the decoded body, up to object key order and insignificant
// white space.
func encodeRequest(conv *Conversation) (json.RawMessage, error) {
	enc, ok := encoders[conv.API]
	if !ok {
		return nil, fmt.Errorf("%s: %w", conv.API, ErrUnsupportedAPI)
	}
	return enc(conv)
}

func encodeChatRequest(c *Conversation) (json.RawMessage, error) {
	o := newObject(c.Params)
	if c.Messages != nil {
		msgs := make([]any, len(c.Messages))
		for i := range c.Messages {
			msgs[i] = encodeChatMessage(&c.Messages[i])
		}
		o["messages"] = msgs
	}
	if c.Tools != nil {
		o["tools"] = encodeTools(c.Tools)
	}
	return marshal(o), nil
}

func encodeChatMessage(m *Message) any {
	o := newObject(m.Extra)
	o["role"] = m.Role
	if len(m.Parts) == 1 && m.Parts[0].Kind == KindToolResult && m.Parts[0].Raw == nil {
		r := m.Parts[0]
		o["tool_call_id"] = r.CallID
		if v, ok := contentValue(r.OutputForm, r.Output, encodeTextPart); ok {
			o["content"] = v
		}
		return o
	}
	var content []Part
	var calls []any
	for _, p := range m.Parts {
		switch {
		case p.Kind == KindReasoning && p.Raw == nil:
			o[p.Type] = p.Text
		case p.Kind == KindToolCall:
			calls = append(calls, encodeChatToolCall(p))
		default:
			content = append(content, p)
		}
	}
	if v, ok := contentValue(m.Form, content, encodeTextPart); ok {
		o["content"] = v
	}
	if calls != nil {
		o["tool_calls"] = calls
	}
	return o
}

func encodeChatToolCall(p Part) any {
	if p.Raw != nil {
		return p.Raw
	}
	o := newObject(p.Extra)
	o["id"] = p.CallID
	o["type"] = p.Type
	o["function"] = map[string]string{"name": p.Name, "arguments": p.Args}
	return o
}

func encodeResponsesRequest(c *Conversation) (json.RawMessage, error) {
	o := newObject(c.Params)
	if c.System != nil {
		o["instructions"] = c.System.Parts[0].Text
	}
	switch {
	case c.InputForm == FormString && len(c.Messages) == 1 && textOnly(c.Messages[0].Parts):
		o["input"] = c.Messages[0].Parts[0].Text
	case c.Messages != nil:
		items := make([]any, len(c.Messages))
		for i := range c.Messages {
			items[i] = encodeResponsesItem(&c.Messages[i])
		}
		o["input"] = items
	}
	if c.Tools != nil {
		o["tools"] = encodeTools(c.Tools)
	}
	return marshal(o), nil
}

func encodeResponsesItem(m *Message) any {
	if m.Type != "message" && len(m.Parts) == 1 && m.Parts[0].Raw != nil && m.Extra == nil {
		return m.Parts[0].Raw
	}
	o := newObject(m.Extra)
	if m.TypeSet {
		o["type"] = m.Type
	}
	switch m.Type {
	case "function_call":
		p := m.Parts[0]
		o["call_id"], o["name"], o["arguments"] = p.CallID, p.Name, p.Args
		return o
	case "function_call_output", "custom_tool_call_output":
		p := m.Parts[0]
		o["call_id"] = p.CallID
		o["output"], _ = contentValue(p.OutputForm, p.Output, encodeTextPart)
		return o
	}
	if m.Role != "" {
		o["role"] = m.Role
	}
	if v, ok := contentValue(m.Form, m.Parts, encodeTextPart); ok {
		o["content"] = v
	}
	return o
}

func encodeMessagesRequest(c *Conversation) (json.RawMessage, error) {
	o := newObject(c.Params)
	if c.System != nil {
		o["system"], _ = contentValue(c.System.Form, c.System.Parts, encodeAnthropicBlock)
	}
	if c.Messages != nil {
		msgs := make([]any, len(c.Messages))
		for i := range c.Messages {
			m := &c.Messages[i]
			mo := newObject(m.Extra)
			mo["role"] = m.Role
			if v, ok := contentValue(m.Form, m.Parts, encodeAnthropicBlock); ok {
				mo["content"] = v
			}
			msgs[i] = mo
		}
		o["messages"] = msgs
	}
	if c.Tools != nil {
		o["tools"] = encodeTools(c.Tools)
	}
	return marshal(o), nil
}

func encodeAnthropicBlock(p Part) any {
	if p.Raw != nil {
		return p.Raw
	}
	switch p.Kind {
	case KindToolCall:
		o := newObject(p.Extra)
		o["type"], o["id"], o["name"] = "tool_use", p.CallID, p.Name
		o["input"] = json.RawMessage(p.Args)
		return o
	case KindToolResult:
		o := newObject(p.Extra)
		o["type"], o["tool_use_id"] = "tool_result", p.CallID
		if v, ok := contentValue(p.OutputForm, p.Output, encodeAnthropicBlock); ok {
			o["content"] = v
		}
		return o
	}
	return encodeTextPart(p)
}

func encodeCompletionsRequest(c *Conversation) (json.RawMessage, error) {
	o := newObject(c.Params)
	if len(c.Messages) == 1 {
		p := c.Messages[0].Parts
		switch {
		case c.InputForm == FormString && textOnly(p):
			o["prompt"] = p[0].Text
		case len(p) == 1 && p[0].Raw != nil:
			o["prompt"] = p[0].Raw
		default:
			return nil, fmt.Errorf("completions prompt must be one text or verbatim part")
		}
	} else if len(c.Messages) > 1 {
		return nil, fmt.Errorf("completions request has %d messages, want 1", len(c.Messages))
	}
	return marshal(o), nil
}

// textOnly reports whether parts is exactly one plain text part that a
// plain string can carry.
func textOnly(parts []Part) bool {
	return len(parts) == 1 && parts[0].Kind == KindText && parts[0].Raw == nil && len(parts[0].Extra) == 0
}

// contentValue encodes parts in the given form.
func contentValue(form Form, parts []Part, encode func(Part) any) (any, bool) {
	switch form {
	case FormAbsent:
		return nil, false
	case FormNull:
		return json.RawMessage("null"), true
	case FormString:
		if textOnly(parts) {
			return parts[0].Text, true
		}
	}
	out := make([]any, len(parts))
	for i, p := range parts {
		out[i] = encode(p)
	}
	return out, true
}

// encodeTools writes tool definitions back verbatim.
func encodeTools(tools []Tool) []json.RawMessage {
	out := make([]json.RawMessage, len(tools))
	for i, t := range tools {
		out[i] = t.Raw
	}
	return out
}
