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
// harness sent. Threads are found by comparing prefix hash chains of these
// elements, so that no two prompts are ever compared message by message
// (linear in calls and bytes).

// elements is the element view of one request.
type elements struct {
	raw    [][]byte // each element's JSON, sharing the request's memory
	chain  []uint64 // chain[i] is the hash of raw[:i]; len(raw)+1 entries
	sysLen int      // leading system/developer elements
	hasSys bool     // raw[0] is the top-level instructions, not a message
}

// ignoredMembers are object members that harnesses move between calls
// without changing the conversation: Anthropic cache breakpoints.
const ignoredMember = "cache_control"

// newElements reads the element view of a request body of api.
func newElements(api string, body []byte) elements {
	var e elements
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
			e.raw = append(e.raw, rawOf(body, v))
			return true
		})
	} else if list.Exists() {
		e.raw = append(e.raw, rawOf(body, list))
	}
	e.chain = make([]uint64, len(e.raw)+1)
	e.chain[0] = chainSeed
	inSys := true
	for i, r := range e.raw {
		e.chain[i+1] = mix(e.chain[i], elementHash(r))
		if inSys && (i == 0 && e.hasSys || isSystemRole(r)) {
			e.sysLen++
		} else {
			inSys = false
		}
	}
	return e
}

func (e *elements) addSystem(body []byte, path string) {
	// decodeResponsesRequest only lifts string instructions into System
	if v := gjson.Get(unsafeString(body), path); v.Exists() && v.Type != gjson.Null && (path != "instructions" || v.Type == gjson.String) {
		e.raw = append(e.raw, rawOf(body, v))
		e.hasSys = true
	}
}

// rawOf returns v's bytes within body without copying when gjson knows
// their position.
func rawOf(body []byte, v gjson.Result) []byte {
	return sub(body, v)
}

// isSystemRole reports whether a message element has a system or
// developer role.
func isSystemRole(raw []byte) bool {
	role := gjson.Get(unsafeString(raw), "role").String()
	return role == "system" || role == "developer"
}

const chainSeed = 0x9e3779b97f4a7c15

// mix extends a chain hash by one element hash.
func mix(chain, h uint64) uint64 {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], chain)
	binary.LittleEndian.PutUint64(b[8:], h)
	return xxhash.Sum64(b[:])
}

// elementHash hashes an element's bytes without its cache_control members.
func elementHash(raw []byte) uint64 {
	if !bytes.Contains(raw, []byte(`"`+ignoredMember+`"`)) {
		return xxhash.Sum64(raw)
	}
	return xxhash.Sum64(stripMember(raw, ignoredMember))
}

// commonPrefix returns how many leading elements a and b share, by binary
// search over their chains (equal chain values mean equal prefixes).
func commonPrefix(a, b []uint64) int {
	lo, hi := 0, min(len(a), len(b))-1 // chain[lo] always equal
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if a[mid] == b[mid] {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// stripMember returns raw without every object member named key (and one
// comma next to it). The result is what a serializer would have written
// had the member been absent, so it hashes like such a message.
func stripMember(raw []byte, key string) []byte {
	out := make([]byte, 0, len(raw))
	last := 0
	for i := 0; i < len(raw); i++ {
		if raw[i] != '"' {
			continue
		}
		end := skipString(raw, i)
		if string(raw[i+1:end-1]) != key {
			i = end - 1
			continue
		}
		colon := skipSpace(raw, end)
		if colon >= len(raw) || raw[colon] != ':' {
			i = end - 1
			continue
		}
		start, stop := i, skipValue(raw, skipSpace(raw, colon+1))
		if next := skipSpace(raw, stop); next < len(raw) && raw[next] == ',' {
			stop = next + 1
		} else if prev := bytes.LastIndexByte(raw[:start], ','); prev >= last && len(bytes.TrimSpace(raw[prev+1:start])) == 0 {
			start = prev
		}
		out = append(out, raw[last:start]...)
		last, i = stop, stop-1
	}
	return append(out, raw[last:]...)
}

// skipString returns the index just past the string starting at raw[i].
func skipString(raw []byte, i int) int {
	for j := i + 1; j < len(raw); j++ {
		switch raw[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(raw)
}

func skipSpace(raw []byte, i int) int {
	for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the index just past the JSON value starting at raw[i].
func skipValue(raw []byte, i int) int {
	depth := 0
	for j := i; j < len(raw); j++ {
		switch raw[j] {
		case '"':
			j = skipString(raw, j) - 1
			if depth == 0 {
				return j + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return j
			}
			depth--
			if depth == 0 {
				return j + 1
			}
		case ',':
			if depth == 0 {
				return j
			}
		}
	}
	return len(raw)
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
