package reconstruct

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
)

// OpenAI Responses API: request `instructions`, `input` (a string or a
// list of items) and `tools`; response `output` (a list of items). Each
// item is one [Message]: message items keep their role, function_call and
// reasoning items are assistant messages, function_call_output items are
// tool messages. Items of other types are kept verbatim.

var responsesTextTypes = map[string]bool{"input_text": true, "output_text": true}

func decodeResponsesRequest(body []byte) (*Conversation, error) {
	f, err := decodeObject(body)
	if err != nil {
		return nil, err
	}
	c := &Conversation{API: apiResponses}
	if s, ok := f.takeStr("instructions"); ok {
		c.System = &Message{Role: "system", Form: FormString, Parts: []Part{{Kind: KindText, Text: s}}}
	}
	if raw, ok := f.take("input"); ok {
		if s, isStr := jsonString(raw); isStr {
			c.InputForm = FormString
			c.Messages = []Message{{Role: "user", Form: FormString, Parts: []Part{{Kind: KindText, Text: s}}}}
		} else if c.Messages, err = decodeList(raw, decodeResponsesItem); err != nil {
			return nil, fmt.Errorf("input: %w", err)
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

func decodeResponsesItem(raw json.RawMessage) (Message, error) {
	f, err := decodeObject(raw)
	if err != nil {
		return Message{}, err
	}
	typ, typeSet := f.str("type")
	_, hasRole := f.str("role")
	switch {
	case typ == "message" || (!typeSet && hasRole):
		return decodeResponsesMessage(f, typ, typeSet)
	case typ == "function_call":
		return decodeFunctionCall(f, raw), nil
	case typ == "function_call_output" || typ == "custom_tool_call_output":
		return decodeFunctionOutput(f, raw, typ)
	case typ == "reasoning":
		return Message{Role: "assistant", Type: typ, TypeSet: true, Parts: []Part{reasoningItem(raw)}}, nil
	}
	return opaqueItem(raw, typ), nil
}

func decodeResponsesMessage(f fields, typ string, typeSet bool) (Message, error) {
	role, _ := f.takeStr("role")
	delete(f, "type")
	content, present := f.take("content")
	form, parts, err := decodeContent(content, present, decodeResponsesPart)
	if err != nil {
		return Message{}, fmt.Errorf("content: %w", err)
	}
	return Message{Role: role, Type: typ, TypeSet: typeSet, Form: form, Parts: parts, Extra: f.rest()}, nil
}

func decodeResponsesPart(raw json.RawMessage) (Part, error) {
	p, err := textPart(raw, responsesTextTypes, func(typ string) Kind {
		if typ == "input_image" {
			return KindImage
		}
		return KindOther
	})
	if p.Kind == KindImage {
		p.URL = gjson.Get(unsafeString(raw), "image_url").String()
	}
	return p, err
}

// decodeFunctionCall maps a function_call item; an item missing one of the
// usual members is kept verbatim.
func decodeFunctionCall(f fields, raw json.RawMessage) Message {
	callID, ok1 := f.str("call_id")
	name, ok2 := f.str("name")
	args, ok3 := f.str("arguments")
	p := Part{Kind: KindToolCall, Type: "function_call", CallID: callID, Name: name, Args: args}
	if !ok1 || !ok2 || !ok3 {
		p.Raw = raw
		return Message{Role: "assistant", Type: "function_call", TypeSet: true, Parts: []Part{p}}
	}
	for _, k := range [...]string{"type", "call_id", "name", "arguments"} {
		delete(f, k)
	}
	return Message{Role: "assistant", Type: "function_call", TypeSet: true, Parts: []Part{p}, Extra: f.rest()}
}

func decodeFunctionOutput(f fields, raw json.RawMessage, typ string) (Message, error) {
	callID, ok := f.str("call_id")
	out, present := f["output"]
	if !ok || !present {
		return opaqueItem(raw, typ), nil
	}
	form, parts, err := decodeContent(out, true, decodeResponsesPart)
	if err != nil {
		return Message{}, fmt.Errorf("output: %w", err)
	}
	for _, k := range [...]string{"type", "call_id", "output"} {
		delete(f, k)
	}
	p := Part{Kind: KindToolResult, Type: typ, CallID: callID, Output: parts, OutputForm: form}
	return Message{Role: "tool", Type: typ, TypeSet: true, Parts: []Part{p}, Extra: f.rest()}, nil
}

// reasoningItem keeps a reasoning item verbatim, with its summary and
// reasoning text and its encrypted content as views.
func reasoningItem(raw json.RawMessage) Part {
	r := gjson.ParseBytes(raw)
	var texts []string
	for _, path := range [...]string{"summary.#.text", "content.#.text"} {
		for _, t := range r.Get(path).Array() {
			texts = append(texts, t.String())
		}
	}
	return Part{Kind: KindReasoning, Type: "reasoning", Text: strings.Join(texts, "\n"),
		Opaque: r.Get("encrypted_content").String(), Raw: raw}
}

// opaqueItem keeps an item of a type this package does not model. Its role
// is taken from the item, or guessed from the type's suffix so that views
// place it: *_call items come from the model, *_output items from tools.
func opaqueItem(raw json.RawMessage, typ string) Message {
	r := gjson.ParseBytes(raw)
	role := r.Get("role").String()
	kind := KindOther
	switch {
	case role != "":
	case strings.HasSuffix(typ, "_call"):
		role, kind = "assistant", KindToolCall
	case strings.HasSuffix(typ, "_output"):
		role, kind = "tool", KindToolResult
	default:
		role = "user"
	}
	p := Part{Kind: kind, Type: typ, CallID: r.Get("call_id").String(), Name: r.Get("name").String(), Raw: raw}
	if kind == KindToolCall {
		p.Args = r.Get("input").String()
	}
	return Message{Role: role, Type: typ, TypeSet: true, Parts: []Part{p}}
}

// decodeResponsesCompletion returns the output items of a response object.
func decodeResponsesCompletion(resp []byte) ([]Message, error) {
	out := gjson.Get(unsafeString(resp), "output")
	if !out.IsArray() {
		return nil, fmt.Errorf("no output array")
	}
	return decodeList(json.RawMessage(out.Raw), decodeResponsesItem)
}
