package reconstruct

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/tidwall/gjson"
)

// Anthropic messages: request `system` (a string or text blocks),
// `messages` (role + content string or blocks) and `tools`; response is a
// message object whose `content` is a list of blocks. tool_use and
// tool_result blocks become tool call and tool result parts; thinking and
// redacted_thinking blocks are kept verbatim as reasoning.

var anthropicTextTypes = map[string]bool{"text": true}

func decodeMessagesRequest(body []byte) (*Conversation, error) {
	f, err := decodeObject(body)
	if err != nil {
		return nil, err
	}
	c := &Conversation{API: apiMessages}
	if raw, ok := f.take("system"); ok {
		form, parts, err := decodeContent(raw, true, decodeAnthropicBlock)
		if err != nil {
			return nil, fmt.Errorf("system: %w", err)
		}
		c.System = &Message{Role: "system", Form: form, Parts: parts}
	}
	if raw, ok := f.take("messages"); ok {
		if c.Messages, err = decodeList(raw, decodeAnthropicMessage); err != nil {
			return nil, fmt.Errorf("messages: %w", err)
		}
	}
	if raw, ok := f.take("tools"); ok {
		c.Tools, err = toolDefs(raw, func(t fields) string { s, _ := t.str("name"); return s })
		if err != nil {
			return nil, err
		}
	}
	c.Params = f.rest()
	return c, nil
}

func decodeAnthropicMessage(raw json.RawMessage) (Message, error) {
	f, err := decodeObject(raw)
	if err != nil {
		return Message{}, err
	}
	role, ok := f.takeStr("role")
	if !ok {
		return Message{}, fmt.Errorf("no role")
	}
	content, present := f.take("content")
	form, parts, err := decodeContent(content, present, decodeAnthropicBlock)
	if err != nil {
		return Message{}, fmt.Errorf("content: %w", err)
	}
	return Message{Role: role, Form: form, Parts: parts, Extra: f.rest()}, nil
}

func decodeAnthropicBlock(raw json.RawMessage) (Part, error) {
	r := gjson.ParseBytes(raw)
	switch typ := r.Get("type").String(); typ {
	case "tool_use":
		return decodeToolUse(raw, r)
	case "tool_result":
		return decodeToolResult(raw, r)
	case "thinking":
		return Part{Kind: KindReasoning, Type: typ, Text: r.Get("thinking").String(),
			Opaque: r.Get("signature").String(), Raw: raw}, nil
	case "redacted_thinking":
		return Part{Kind: KindReasoning, Type: typ, Opaque: r.Get("data").String(), Raw: raw}, nil
	case "image":
		return Part{Kind: KindImage, Type: typ, URL: anthropicImageURL(r.Get("source")), Raw: raw}, nil
	}
	return textPart(raw, anthropicTextTypes, func(string) Kind { return KindOther })
}

// anthropicImageURL returns a URL source's URL, or a base64 source as a
// data URL.
func anthropicImageURL(src gjson.Result) string {
	switch src.Get("type").String() {
	case "url":
		return src.Get("url").String()
	case "base64":
		return "data:" + src.Get("media_type").String() + ";base64," + src.Get("data").String()
	}
	return ""
}

func decodeToolUse(raw json.RawMessage, r gjson.Result) (Part, error) {
	input := r.Get("input")
	p := Part{Kind: KindToolCall, Type: "tool_use", CallID: r.Get("id").String(), Name: r.Get("name").String(), Args: input.Raw}
	if !isStr(r.Get("id")) || !isStr(r.Get("name")) || !input.Exists() {
		p.Raw = raw
		return p, nil
	}
	f, err := decodeObject(raw)
	if err != nil {
		return Part{}, err
	}
	for _, k := range [...]string{"type", "id", "name", "input"} {
		delete(f, k)
	}
	p.Extra = f.rest()
	return p, nil
}

func decodeToolResult(raw json.RawMessage, r gjson.Result) (Part, error) {
	if !isStr(r.Get("tool_use_id")) {
		return Part{Kind: KindToolResult, Type: "tool_result", Raw: raw}, nil
	}
	f, err := decodeObject(raw)
	if err != nil {
		return Part{}, err
	}
	content, present := f.take("content")
	form, parts, err := decodeContent(content, present, decodeAnthropicBlock)
	if err != nil {
		return Part{}, fmt.Errorf("tool_result content: %w", err)
	}
	delete(f, "type")
	delete(f, "tool_use_id")
	return Part{Kind: KindToolResult, Type: "tool_result", CallID: r.Get("tool_use_id").String(),
		Output: parts, OutputForm: form, Extra: f.rest()}, nil
}

// decodeMessagesCompletion returns the assistant message of a message
// object.
func decodeMessagesCompletion(resp []byte) ([]Message, error) {
	r := gjson.ParseBytes(resp)
	content := r.Get("content")
	if !content.IsArray() {
		return nil, fmt.Errorf("no content array")
	}
	_, parts, err := decodeContent(json.RawMessage(content.Raw), true, decodeAnthropicBlock)
	if err != nil {
		return nil, err
	}
	role := r.Get("role").String()
	if role == "" {
		role = "assistant"
	}
	return []Message{{Role: role, Parts: parts}}, nil
}

// Legacy completions: the prompt is one user message (a string, or kept
// verbatim when it is a list of strings or token ids) and the completion
// is choices[0].text.

func decodeCompletionsRequest(body []byte) (*Conversation, error) {
	f, err := decodeObject(body)
	if err != nil {
		return nil, err
	}
	c := &Conversation{API: apiCompletions}
	if raw, ok := f.take("prompt"); ok {
		if s, isStr := jsonString(raw); isStr {
			c.InputForm = FormString
			c.Messages = []Message{{Role: "user", Form: FormString, Parts: []Part{{Kind: KindText, Text: s}}}}
		} else {
			c.Messages = []Message{{Role: "user", Parts: []Part{{Kind: KindOther, Type: "prompt", Raw: bytes.Clone(raw)}}}}
		}
	}
	c.Params = f.rest()
	return c, nil
}

func decodeCompletionsCompletion(resp []byte) ([]Message, error) {
	text := gjson.Get(unsafeString(resp), "choices.0.text")
	if text.Type != gjson.String {
		return nil, fmt.Errorf("no choices[0].text")
	}
	return []Message{{Role: "assistant", Form: FormString, Parts: []Part{{Kind: KindText, Text: text.String()}}}}, nil
}
