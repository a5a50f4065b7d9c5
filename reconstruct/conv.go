package reconstruct

import (
	"encoding/json"

	"github.com/orchard-rl/orchard/recorder"
)

// Conversation is the canonical form of one model request: what the model
// was asked, independent of which of the four recorded APIs carried it.
// [DecodeRequest] loses nothing: fields the model does not name are kept
// verbatim in the Extra maps and in [Conversation.Params], so the request
// can be written back as the same JSON document (object key order aside),
// which the package's tests do for every API.
type Conversation struct {
	// API is the recorder API name the request was decoded from.
	API recorder.API
	// System is the top-level instruction block (Anthropic `system`,
	// Responses `instructions`); nil when the request has none. Chat
	// completions carry system and developer prompts as messages instead.
	System *Message
	// Messages are the conversation turns in request order. For the
	// Responses API each input item is one message; for completions the
	// prompt is one user message.
	Messages []Message
	// Tools are the tool definitions offered to the model.
	Tools []Tool
	// Params holds every other top-level request field verbatim.
	Params map[string]json.RawMessage
	// InputForm records how the message list was written where the API
	// allows a plain string (Responses `input`, completions `prompt`).
	InputForm Form
}

// Form records how a content field was written on the wire, so that
// encoding reproduces it.
type Form uint8

// Content forms.
const (
	FormParts  Form = iota // an array of parts (or blocks, or items)
	FormString             // a plain string: exactly one text part
	FormNull               // JSON null: no parts
	FormAbsent             // the field was missing: no parts
)

// Message is one conversation turn (or one Responses input item).
type Message struct {
	// Role is system, developer, user, assistant or tool. Responses
	// function_call and reasoning items are assistant messages;
	// function_call_output items are tool messages.
	Role string
	// Type is the wire type tag of a Responses item ("message",
	// "function_call", ...); "" when the item had none or the API has no
	// item types. TypeSet reports whether the tag was present.
	Type    string
	TypeSet bool
	// Form is how the message content was written.
	Form Form
	// Parts is the content: text, images, reasoning, tool calls and tool
	// results, in wire order (chat tool_calls follow the content parts).
	Parts []Part
	// Extra holds the message's other wire fields verbatim (ids, status,
	// name, cache_control, ...).
	Extra map[string]json.RawMessage
}

// Kind classifies a [Part].
type Kind uint8

// Part kinds.
const (
	KindText       Kind = iota // plain text
	KindImage                  // an image (URL, data URL or source block)
	KindReasoning              // model reasoning; Opaque holds encrypted or signed content
	KindToolCall               // a call of a tool by the model
	KindToolResult             // the result of a tool call, linked by CallID
	KindOther                  // any other part, kept verbatim in Raw
)

var kindNames = [...]string{"text", "image", "reasoning", "tool_call", "tool_result", "other"}

// String returns the kind's name as used in documentation and errors.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// Part is one element of a message's content.
//
// A part with Raw set is kept verbatim: encoding writes Raw unchanged and
// the other fields are read-only views of it (an image's URL, a reasoning
// block's text and signature). A part without Raw is written from its
// fields plus Extra.
type Part struct {
	Kind Kind
	// Type is the wire type tag ("text", "input_text", "output_text",
	// "tool_use", "thinking", "function", ...).
	Type string
	// Text is the text of a text part or the readable text of reasoning.
	Text string
	// URL is an image's URL or data URL, when it has one.
	URL string
	// CallID links a tool call and its result: chat `id`/`tool_call_id`,
	// Responses `call_id`, Anthropic `id`/`tool_use_id`.
	CallID string
	// Name is the called tool's name.
	Name string
	// Args is the tool call's arguments as JSON text, exactly as generated
	// (chat and Responses send a string, Anthropic an object).
	Args string
	// Output is the content of a tool result, written in OutputForm.
	Output     []Part
	OutputForm Form
	// Opaque is encrypted or signed reasoning (Responses
	// encrypted_content, Anthropic signature or redacted data).
	Opaque string
	// Extra holds the part's other wire fields verbatim.
	Extra map[string]json.RawMessage
	// Raw, when set, is the whole wire part, written back unchanged.
	Raw json.RawMessage
}

// Tool is one tool definition offered to the model.
type Tool struct {
	// Name is the tool's name ("" for built-in tools without one).
	Name string
	// Raw is the wire definition, kept verbatim.
	Raw json.RawMessage
}
