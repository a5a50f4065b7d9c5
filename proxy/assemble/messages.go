package assemble

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/tidwall/gjson"
)

// messages assembles an Anthropic messages stream into the message object the
// non-streaming API returns.
type messages struct {
	msg    object
	usage  object
	blocks map[int64]*mBlock
	begun  bool
	done   bool
	errs   []string
	n      int
}

// mBlock is one content block under construction.
type mBlock struct {
	obj       object
	texts     map[string][]byte // text, thinking, signature deltas
	json      []byte            // input_json_delta fragments
	hasJSON   bool
	citations [][]byte
}

func (m *messages) event(name string, data []byte) {
	m.n++
	if !gjson.ValidBytes(data) {
		m.errs = append(m.errs, "malformed event "+itoa(m.n))
		return
	}
	v := gjson.ParseBytes(data)
	typ := v.Get("type").String()
	if typ == "" {
		typ = name
	}
	switch typ {
	case "message_start":
		m.start(v.Get("message"))
	case "content_block_start":
		b := &mBlock{texts: map[string][]byte{}}
		setAll(&b.obj, v.Get("content_block"))
		if m.blocks == nil {
			m.blocks = map[int64]*mBlock{}
		}
		m.blocks[v.Get("index").Int()] = b
	case "content_block_delta":
		if b := m.blocks[v.Get("index").Int()]; b != nil {
			b.delta(v.Get("delta"))
		}
	case "message_delta":
		// stop_reason and stop_sequence are final here even when null, and
		// usage counts are cumulative totals that replace earlier ones.
		v.Get("delta").ForEach(func(k, f gjson.Result) bool {
			m.msg.set(k.String(), []byte(f.Raw))
			return true
		})
		setAll(&m.usage, v.Get("usage"))
	case "message_stop":
		m.done = true
	case "error":
		m.errs = append(m.errs, errorMessage(v))
	}
}

func (m *messages) start(msg gjson.Result) {
	m.begun = true
	msg.ForEach(func(k, f gjson.Result) bool {
		switch k.String() {
		case "usage":
			m.msg.set("usage", nullJSON)
			setAll(&m.usage, f)
		default:
			m.msg.set(k.String(), []byte(f.Raw))
		}
		return true
	})
}

func setAll(o *object, v gjson.Result) {
	v.ForEach(func(k, f gjson.Result) bool {
		o.set(k.String(), []byte(f.Raw))
		return true
	})
}

func (b *mBlock) delta(d gjson.Result) {
	switch d.Get("type").String() {
	case "text_delta":
		b.texts["text"] = append(b.texts["text"], d.Get("text").String()...)
	case "thinking_delta":
		b.texts["thinking"] = append(b.texts["thinking"], d.Get("thinking").String()...)
	case "signature_delta":
		b.texts["signature"] = append(b.texts["signature"], d.Get("signature").String()...)
	case "input_json_delta":
		b.json, b.hasJSON = append(b.json, d.Get("partial_json").String()...), true
	case "citations_delta":
		b.citations = append(b.citations, []byte(d.Get("citation").Raw))
	}
}

func (b *mBlock) render() []byte {
	o := b.obj
	for k, t := range b.texts {
		o.set(k, quote(t))
	}
	if b.hasJSON {
		var c bytes.Buffer
		if len(bytes.TrimSpace(b.json)) > 0 && json.Compact(&c, b.json) == nil {
			o.set("input", c.Bytes())
		}
	}
	if len(b.citations) > 0 {
		o.set("citations", rawArray(b.citations))
	}
	return o.bytes()
}

func (m *messages) result() Result {
	r := Result{Done: m.done, Err: strings.Join(m.errs, "; ")}
	if !m.begun && len(m.blocks) == 0 {
		return r
	}
	idx := sortedKeys(m.blocks)
	content := make([][]byte, len(idx))
	for j, i := range idx {
		content[j] = m.blocks[i].render()
	}
	m.msg.set("content", rawArray(content))
	if len(m.usage.members) > 0 {
		u := m.usage.bytes()
		m.msg.set("usage", u)
		r.Usage = u
	}
	r.Response = m.msg.bytes()
	if v, ok := m.msg.get("model"); ok {
		r.Model = gjson.ParseBytes(v).String()
	}
	return r
}

func (m *messages) started() bool { return m.begun || len(m.blocks) > 0 }
