package reconstruct

import (
	"bytes"
	"encoding/json"

	"github.com/tidwall/gjson"
)

// Every call resends its history, so the turns format would decode and
// encode each message once per later call. promptCache converts each
// distinct prompt element of an episode once and copies its JSON after
// that. Only chat requests take this path: their elements map one to one
// to chat messages; other APIs merge or split elements (see chatView).

// promptCache maps a chat message element's raw JSON to its chat view's
// JSON (one or more messages, comma-separated). It is per episode.
type promptCache map[string][]byte

// promptJSON returns the JSON array of cs's prompt as [episode.turn]
// writes it, and its tools; ok is false when the call must take the
// general path (not chat, or a message or tool that does not decode).
func (pc promptCache) promptJSON(cs *callState) (prompt []byte, tools []json.RawMessage, ok bool) {
	// els is read only from requests that are valid JSON objects
	if cs.call.API != apiChat || !cs.els.read {
		return nil, nil, false
	}
	body := unsafeString(cs.call.Request)
	if m := gjson.Get(body, "messages"); m.Exists() && !m.IsArray() {
		return nil, nil, false
	}
	if t := gjson.Get(body, "tools"); t.Exists() {
		defs, err := toolDefs(json.RawMessage(t.Raw), func(fields) string { return "" })
		if err != nil {
			return nil, nil, false
		}
		tools = chatTools(apiChat, defs)
	}
	out := append(make([]byte, 0, len(cs.call.Request)), '[')
	for i, raw := range cs.els.raw {
		enc, hit := pc[string(raw)]
		if !hit {
			m, err := decodeChatMessage(raw)
			if err != nil {
				return nil, nil, false
			}
			enc = encodeChatMessages(convertRun([]viewMsg{{msg: &m, call: -1}}))
			pc[string(raw)] = enc
		}
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, enc...)
	}
	return append(out, ']'), tools, true
}

// encodeChatMessages writes msgs as encoding/json does within a list.
func encodeChatMessages(msgs []ChatMessage) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for i := range msgs {
		if i > 0 {
			b.WriteByte(',')
		}
		enc.Encode(&msgs[i])    // a ChatMessage always encodes
		b.Truncate(b.Len() - 1) // Encode's newline
	}
	return b.Bytes()
}

// spliceField replaces the value null of the member key in the JSON
// object line (as encoding/json wrote it) with value. Members before key
// are ids and names, whose strings cannot hold `,"key":null,` unescaped.
func spliceField(line []byte, key string, value []byte) ([]byte, bool) {
	marker := `,"` + key + `":null`
	i := bytes.Index(line, []byte(marker))
	if i < 0 {
		return line, false
	}
	at := i + len(marker) - len("null")
	out := make([]byte, 0, len(line)+len(value))
	out = append(out, line[:at]...)
	out = append(out, value...)
	return append(out, line[at+len("null"):]...), true
}
