package reconstruct

import (
	"encoding/json"
	"fmt"

	"github.com/tidwall/gjson"
)

// OpenAI chat completions: request `messages` and `tools`, response
// `choices[0].message`. Reasoning arrives in the vLLM/SGLang extension
// fields `reasoning_content` or `reasoning` of a message.

var chatTextTypes = map[string]bool{"text": true}

// chatReasoningFields are the message members that carry reasoning text.
var chatReasoningFields = [...]string{"reasoning_content", "reasoning"}

func decodeChatRequest(body []byte) (*Conversation, error) {
	f, err := decodeObject(body)
	if err != nil {
		return nil, err
	}
	c := &Conversation{API: apiChat}
	if raw, ok := f.take("messages"); ok {
		if c.Messages, err = decodeList(raw, decodeChatMessage); err != nil {
			return nil, fmt.Errorf("messages: %w", err)
		}
	}
	if raw, ok := f.take("tools"); ok {
		c.Tools, err = toolDefs(raw, func(t fields) string {
			return gjson.Get(unsafeString(t["function"]), "name").String()
		})
		if err != nil {
			return nil, err
		}
	}
	c.Params = f.rest()
	return c, nil
}

// decodeList decodes a JSON array of messages.
func decodeList(raw json.RawMessage, dec func(json.RawMessage) (Message, error)) ([]Message, error) {
	elems, ok, err := decodeArray(raw)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("not an array")
	}
	msgs := make([]Message, len(elems))
	for i, e := range elems {
		if msgs[i], err = dec(e); err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
	}
	return msgs, nil
}

func decodeChatMessage(raw json.RawMessage) (Message, error) {
	f, err := decodeObject(raw)
	if err != nil {
		return Message{}, err
	}
	role, ok := f.takeStr("role")
	if !ok {
		return Message{}, fmt.Errorf("no role")
	}
	m := Message{Role: role}
	content, present := f.take("content")
	form, parts, err := decodeContent(content, present, decodeChatPart)
	if err != nil {
		return Message{}, fmt.Errorf("content: %w", err)
	}
	if id, ok := f.str("tool_call_id"); ok && role == "tool" {
		delete(f, "tool_call_id")
		m.Parts = []Part{{Kind: KindToolResult, CallID: id, Output: parts, OutputForm: form}}
		m.Extra = f.rest()
		return m, nil
	}
	m.Form = form
	for _, key := range chatReasoningFields {
		if text, ok := f.takeStr(key); ok {
			m.Parts = append(m.Parts, Part{Kind: KindReasoning, Type: key, Text: text})
		}
	}
	m.Parts = append(m.Parts, parts...)
	if raw, ok := f["tool_calls"]; ok {
		calls, isArray, err := decodeArray(raw)
		if err != nil {
			return Message{}, fmt.Errorf("tool_calls: %w", err)
		}
		if isArray && len(calls) > 0 {
			delete(f, "tool_calls")
			for _, tc := range calls {
				m.Parts = append(m.Parts, decodeChatToolCall(tc))
			}
		}
	}
	m.Extra = f.rest()
	return m, nil
}

func decodeChatPart(raw json.RawMessage) (Part, error) {
	return textPart(raw, chatTextTypes, func(typ string) Kind {
		if typ == "image_url" {
			return KindImage
		}
		return KindOther
	})
}

// decodeChatToolCall keeps a call of the usual shape as fields and any
// other shape verbatim.
func decodeChatToolCall(raw json.RawMessage) Part {
	r := gjson.ParseBytes(raw)
	p := Part{Kind: KindToolCall, Type: r.Get("type").String(), CallID: r.Get("id").String(),
		Name: r.Get("function.name").String(), Args: r.Get("function.arguments").String()}
	f, err := decodeObject(raw)
	fn := r.Get("function")
	if err != nil || !isStr(r.Get("id")) || !isStr(r.Get("type")) || !fn.IsObject() ||
		!isStr(fn.Get("name")) || !isStr(fn.Get("arguments")) || len(fn.Map()) != 2 {
		p.Raw = raw
		return p
	}
	delete(f, "id")
	delete(f, "type")
	delete(f, "function")
	p.Extra = f.rest()
	return p
}

// decodeChatCompletion returns the assistant message of choice 0.
func decodeChatCompletion(resp []byte) ([]Message, error) {
	msg := gjson.Get(unsafeString(resp), "choices.0.message")
	if !msg.IsObject() {
		return nil, fmt.Errorf("no choices[0].message")
	}
	m, err := decodeChatMessage(json.RawMessage(msg.Raw))
	if err != nil {
		return nil, err
	}
	return []Message{m}, nil
}
