package reconstruct

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"strings"

	"github.com/cespare/xxhash/v2"
	"github.com/tidwall/gjson"
)

// A prompt is read as a list of elements: the top-level instructions (if
// any) followed by the messages or input items, each the raw JSON the
// harness sent. Samples are laid out over them; which call continues
// which is the lineage package's to say (see thread).

// elements is the element view of one request.
type elements struct {
	raw    [][]byte // each element's JSON, sharing the request's memory
	hasSys bool     // raw[0] is the top-level instructions, not a message
	read   bool     // the request was a JSON object and was read
}

// newElements reads the element view of a request body of api.
func newElements(api string, body []byte) elements {
	e := elements{read: true}
	var listPath string
	switch api {
	case apiChat:
		listPath = "messages"
	case apiMessages:
		listPath = "messages"
		e.addSystem(body, "system")
	case apiResponses:
		listPath = "input"
		e.addSystem(body, "instructions")
	case apiCompletions:
		listPath = "prompt"
	}
	list := gjson.Get(unsafeString(body), listPath)
	if list.IsArray() && api != apiCompletions {
		list.ForEach(func(_, v gjson.Result) bool {
			e.raw = append(e.raw, sub(body, v))
			return true
		})
	} else if list.Exists() {
		e.raw = append(e.raw, sub(body, list))
	}
	return e
}

func (e *elements) addSystem(body []byte, path string) {
	// decodeResponsesRequest only lifts string instructions into System
	if v := gjson.Get(unsafeString(body), path); v.Exists() && v.Type != gjson.Null && (path != "instructions" || v.Type == gjson.String) {
		e.raw = append(e.raw, sub(body, v))
		e.hasSys = true
	}
}

// decodeElement decodes element i of a request of api canonically. The
// instructions element is decoded as a system message.
func decodeElement(api string, e *elements, i int) (Message, error) {
	raw := json.RawMessage(e.raw[i])
	if i == 0 && e.hasSys {
		if s, ok := jsonString(raw); ok {
			return Message{Role: "system", Form: FormString, Parts: []Part{{Kind: KindText, Text: s}}}, nil
		}
		form, parts, err := decodeContent(raw, true, decodeAnthropicBlock)
		return Message{Role: "system", Form: form, Parts: parts}, err
	}
	switch api {
	case apiChat:
		return decodeChatMessage(raw)
	case apiMessages:
		return decodeAnthropicMessage(raw)
	case apiResponses:
		if s, ok := jsonString(raw); ok {
			return Message{Role: "user", Form: FormString, Parts: []Part{{Kind: KindText, Text: s}}}, nil
		}
		return decodeResponsesItem(raw)
	}
	return Message{}, ErrUnsupportedAPI
}

// contentKey identifies what a message says, ignoring how it was written:
// ids of items, content forms, empty text, and reasoning (harnesses drop or
// re-render it; token ids still catch that, see tokens.go). ok is false
// when nothing remains, i.e. the message is reasoning only or empty.
func contentKey(m *Message) (key uint64, ok bool) {
	d := xxhash.New()
	d.WriteString(m.Role)
	for i := range m.Parts {
		p := &m.Parts[i]
		if p.Kind == KindReasoning || (p.Kind == KindText && p.Text == "") {
			continue
		}
		ok = true
		d.Write([]byte{0, byte(p.Kind)})
		switch p.Kind {
		case KindText:
			d.WriteString(p.Text)
		case KindImage:
			d.WriteString(p.URL)
		case KindToolCall:
			d.WriteString(p.CallID + "\x00" + p.Name + "\x00" + compactJSON(p.Args))
		case KindToolResult:
			d.WriteString(p.CallID)
			sub := Message{Parts: p.Output}
			k, _ := contentKey(&sub)
			binary.Write(d, binary.LittleEndian, k)
		default:
			d.WriteString(p.Type)
		}
	}
	return d.Sum64(), ok
}

// compactJSON returns s without insignificant white space when s is JSON.
func compactJSON(s string) string {
	if !strings.ContainsAny(s, " \n\t\r") {
		return s
	}
	var b bytes.Buffer
	if json.Compact(&b, []byte(s)) != nil {
		return s
	}
	return b.String()
}
