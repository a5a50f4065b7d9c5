package reconstruct

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"
)

// fields is a JSON object split into its members, values verbatim.
type fields map[string]json.RawMessage

// errNotObject is returned when a JSON object was expected.
var errNotObject = errors.New("not a JSON object")

// decodeObject splits raw into its members. The values share raw's
// memory. raw must be valid JSON (callers validate whole documents once).
func decodeObject(raw []byte) (fields, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, errNotObject
	}
	f := make(fields, 8)
	r := gjson.Parse(unsafeString(raw))
	r.ForEach(func(k, v gjson.Result) bool {
		f[strings.Clone(k.String())] = sub(raw, v)
		return true
	})
	return f, nil
}

// decodeArray splits raw into its elements, which share raw's memory; ok
// is false when raw is not an array.
func decodeArray(raw []byte) ([]json.RawMessage, bool, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '[' {
		return nil, false, nil
	}
	var a []json.RawMessage
	gjson.Parse(unsafeString(raw)).ForEach(func(_, v gjson.Result) bool {
		a = append(a, sub(raw, v))
		return true
	})
	return a, true, nil
}

// unsafeString views b as a string without copying; b must not change
// while the string is in use.
func unsafeString(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// sub returns the bytes of v, a value parsed from unsafeString(raw),
// without copying them.
func sub(raw []byte, v gjson.Result) json.RawMessage {
	if len(v.Raw) > 0 && len(raw) > 0 {
		off := int(uintptr(unsafe.Pointer(unsafe.StringData(v.Raw))) - uintptr(unsafe.Pointer(unsafe.SliceData(raw))))
		if off >= 0 && off+len(v.Raw) <= len(raw) {
			return raw[off : off+len(v.Raw) : off+len(v.Raw)]
		}
	}
	return json.RawMessage(v.Raw)
}

// take removes key from f and returns its value.
func (f fields) take(key string) (json.RawMessage, bool) {
	v, ok := f[key]
	if ok {
		delete(f, key)
	}
	return v, ok
}

// str returns the member key as a string without removing it; ok is false
// when it is absent or not a string.
func (f fields) str(key string) (string, bool) {
	v, ok := f[key]
	if !ok {
		return "", false
	}
	return jsonString(v)
}

// takeStr removes key and returns it when it is a string; a member of any
// other type is left in place.
func (f fields) takeStr(key string) (string, bool) {
	s, ok := f.str(key)
	if ok {
		delete(f, key)
	}
	return s, ok
}

// rest returns the remaining members, or nil when none remain.
func (f fields) rest() map[string]json.RawMessage {
	if len(f) == 0 {
		return nil
	}
	return f
}

// jsonString decodes raw when it is a JSON string.
func jsonString(raw []byte) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// isNull reports whether raw is the JSON literal null.
func isNull(raw []byte) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}

// object is a JSON object under construction; it marshals with sorted keys.
type object map[string]any

// newObject starts an object from verbatim members.
func newObject(extra map[string]json.RawMessage) object {
	o := make(object, len(extra)+4)
	for k, v := range extra {
		o[k] = v
	}
	return o
}

// marshal encodes v; values built by this package always encode.
func marshal(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("reconstruct: marshal %T: %v", v, err)) // a bug in this package, not bad input
	}
	return b
}

// decodeContent decodes a content value that may be a string, null, absent
// or an array, using part to decode array elements.
func decodeContent(raw json.RawMessage, present bool, part func(json.RawMessage) (Part, error)) (Form, []Part, error) {
	if !present {
		return FormAbsent, nil, nil
	}
	if isNull(raw) {
		return FormNull, nil, nil
	}
	if s, ok := jsonString(raw); ok {
		return FormString, []Part{{Kind: KindText, Text: s}}, nil
	}
	elems, ok, err := decodeArray(raw)
	if err != nil {
		return 0, nil, err
	}
	if !ok {
		return 0, nil, fmt.Errorf("content is neither string, array nor null")
	}
	parts := make([]Part, 0, len(elems))
	for i, e := range elems {
		p, err := part(e)
		if err != nil {
			return 0, nil, fmt.Errorf("part %d: %w", i, err)
		}
		parts = append(parts, p)
	}
	return FormParts, parts, nil
}

// textPart decodes a {"type": T, "text": ...} part, keeping other members
// in Extra; any other shape is kept verbatim as kind.
func textPart(raw json.RawMessage, textTypes map[string]bool, fallback func(typ string) Kind) (Part, error) {
	f, err := decodeObject(raw)
	if err != nil {
		return Part{}, err
	}
	typ, _ := f.str("type")
	if textTypes[typ] {
		if text, ok := f.str("text"); ok {
			delete(f, "type")
			delete(f, "text")
			return Part{Kind: KindText, Type: typ, Text: text, Extra: f.rest()}, nil
		}
	}
	return Part{Kind: fallback(typ), Type: typ, Raw: raw}, nil
}

// encodeTextPart writes a structured text part.
func encodeTextPart(p Part) any {
	if p.Raw != nil {
		return p.Raw
	}
	o := newObject(p.Extra)
	o["type"] = p.Type
	o["text"] = p.Text
	return o
}

// toolDefs splits a tools array, naming each tool by the member at one of
// the given paths.
func toolDefs(raw json.RawMessage, name func(fields) string) ([]Tool, error) {
	elems, ok, err := decodeArray(raw)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("tools is not an array")
	}
	tools := make([]Tool, len(elems))
	for i, e := range elems {
		f, err := decodeObject(e)
		if err != nil {
			return nil, fmt.Errorf("tool %d: %w", i, err)
		}
		tools[i] = Tool{Name: name(f), Raw: e}
	}
	return tools, nil
}

// isStr reports whether r is a JSON string.
func isStr(r gjson.Result) bool { return r.Type == gjson.String }
