package recorder

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/orchard-rl/orchard/internal/jsonout"
)

// metaWriter appends a call's metadata as JSON: the same bytes encoding/json
// gives for the Call that marshalMeta hands it, written field by field and
// noting where each top-level member's value lies, so that a dedup encoder
// gets the metadata's map without parsing it back. It runs for every call
// the proxy records; encoding/json's reflection and the parse after it cost
// about 5% of the proxy's CPU on the token path.
//
// What encoding/json rejects (a time outside RFC 3339's years) makes the
// writer give up, and marshalMeta reports encoding/json's error; a NaN or
// infinite logprob, which the metadata no longer holds, checkLogprobs
// rejects for both. TestMetaWriterFields fails when Call gains a field
// the writer does not know; FuzzMetaWriter holds it to encoding/json.
type metaWriter struct {
	b       []byte
	members []metaMember
	failed  bool
}

// metaMember is a top-level key and its value's extent in the output.
type metaMember struct {
	key        string
	start, end int
}

// marshalMetaMap returns c's metadata, written over dst's spare capacity
// (grown as needed), and, when withMap, its map, whose strings alias the
// returned bytes.
func marshalMetaMap(dst []byte, c *Call, withMap bool) ([]byte, metaMap, error) {
	if err := checkLogprobs(c); err != nil {
		return nil, nil, err
	}
	mp := metaMembers.Get().(*[]metaMember)
	w := metaWriter{b: slices.Grow(dst[:0], metaSize(c)), members: (*mp)[:0]}
	w.call(c)
	defer func() { *mp = w.members; metaMembers.Put(mp) }()
	if w.failed {
		meta, err := marshalMeta(c)
		if err != nil || !withMap {
			return meta, nil, err
		}
		mm, err := parseOwnMeta(meta)
		return meta, mm, err
	}
	if !withMap {
		return w.b, nil, nil
	}
	ms := unsafe.String(unsafe.SliceData(w.b), len(w.b))
	mm := slices.Grow((*metaMaps.Get().(*metaMap))[:0], len(w.members))
	for _, m := range w.members {
		mm = append(mm, metaKV{m.key, ms[m.start:m.end]})
	}
	return w.b, newMetaMap(mm), nil
}

// metaMembers recycles marshalMetaMap's lists of members, and metaMaps the
// maps it returns, which live only while a call is encoded (see
// releaseMetaMap): together 1.5 KB a call.
var (
	metaMembers = sync.Pool{New: func() any { return new([]metaMember) }}
	metaMaps    = sync.Pool{New: func() any { return new(metaMap) }}
)

// releaseMetaMap hands m to a later marshalMetaMap once nothing reads it:
// an encoder keeps copies of what it remembers (see kept).
func releaseMetaMap(m metaMap) {
	if cap(m) == 0 || cap(m) > 64 {
		return
	}
	clear(m[:cap(m)]) // its strings alias a recycled document
	m = m[:0]
	metaMaps.Put(&m)
}

// metaSize guesses the length of c's metadata: fixed fields and about 24
// bytes per token id and logprob.
func metaSize(c *Call) int {
	n := 768 + len(c.Error) + len(c.Upstream) + len(c.Path) + len(c.Model)
	if t := c.Tokens; t != nil {
		n += 40*len(t.Choices) + len(t.Mismatch)
	}
	return n
}

// call writes the fields of Call in their order, leaving out what
// marshalMeta clears (the bodies, usage, call id's value and prompt ids).
func (w *metaWriter) call(c *Call) {
	w.b = append(w.b, '{')
	w.member("schema").str(c.Schema)
	w.member("episode_id").str(c.EpisodeID)
	w.member("seq").int(c.Seq)
	w.member("call_id").str("")
	w.member("api").str(string(c.API))
	w.member("method").str(c.Method)
	w.member("path").str(c.Path)
	if c.Model != "" {
		w.member("model").str(c.Model)
	}
	w.member("stream").bool(c.Stream)
	w.member("started_at").time(c.StartedAt)
	if c.FirstByteAt != nil {
		w.member("first_byte_at").time(*c.FirstByteAt)
	}
	w.member("ended_at").time(c.EndedAt)
	w.member("status").int(int64(c.Status))
	w.member("end_reason").str(string(c.EndReason))
	w.optStr("error", c.Error)
	if c.RequestRaw {
		w.member("request_raw").bool(true)
	}
	w.optStr("request_encoding", c.RequestEncoding)
	w.optStr("response_encoding", c.ResponseEncoding)
	w.member("upstream").str(c.Upstream)
	w.optStr("upstream_kind", c.UpstreamKind)
	if len(c.Injected) > 0 {
		w.member("injected").strs(c.Injected)
	}
	w.optStr("harness", c.Harness)
	if c.Tokens != nil {
		w.member("tokens").tokens(c.Tokens)
	}
	if c.Lineage != nil {
		w.member("lineage").lineage(c.Lineage)
	}
	w.close()
	w.b = append(w.b, '}')
}

// member ends the previous member's value and writes key's name.
func (w *metaWriter) member(key string) *metaWriter {
	if len(w.members) > 0 {
		w.close()
		w.b = append(w.b, ',')
	}
	w.b = append(append(append(w.b, '"'), key...), '"', ':')
	w.members = append(w.members, metaMember{key: key, start: len(w.b)})
	return w
}

func (w *metaWriter) close() {
	if n := len(w.members); n > 0 && w.members[n-1].end == 0 {
		w.members[n-1].end = len(w.b)
	}
}

func (w *metaWriter) optStr(key, s string) {
	if s != "" {
		w.member(key).str(s)
	}
}

func (w *metaWriter) str(s string) { w.b = jsonout.String(w.b, s) }

func (w *metaWriter) strs(ss []string) {
	w.b = append(w.b, '[')
	for i, s := range ss {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.str(s)
	}
	w.b = append(w.b, ']')
}

func (w *metaWriter) int(n int64) { w.b = strconv.AppendInt(w.b, n, 10) }

func (w *metaWriter) bool(v bool) { w.b = strconv.AppendBool(w.b, v) }

// time writes t as time.Time's MarshalJSON does.
func (w *metaWriter) time(t time.Time) {
	b, err := t.AppendText(append(w.b, '"'))
	if err != nil {
		w.failed = true
		return
	}
	w.b = append(b, '"')
}

// tokens writes t without its ids and logprobs: the prompt ids are the
// document's token delta, and the completion ids and logprobs follow it
// (see docVersion), so the metadata holds null ids, and no logprobs, in
// their place.
func (w *metaWriter) tokens(t *Tokens) {
	w.b = append(w.b, `{"prompt_ids":null,"completion_ids":null`...)
	if len(t.Choices) > 0 {
		w.b = append(w.b, `,"choices":[`...)
		for i := range t.Choices {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.b = append(w.b, `{"index":`...)
			w.int(int64(t.Choices[i].Index))
			w.b = append(w.b, `,"completion_ids":null}`...)
		}
		w.b = append(w.b, ']')
	}
	if t.Mismatch != "" {
		w.b = append(w.b, `,"mismatch":`...)
		w.str(t.Mismatch)
	}
	w.b = append(w.b, '}')
}

func (w *metaWriter) lineage(l *Lineage) {
	w.b = append(w.b, '{')
	if l.ParentCallID != "" {
		w.b = append(w.b, `"parent_call_id":`...)
		w.str(l.ParentCallID)
		w.b = append(w.b, ',')
	}
	w.b = append(w.b, `"kind":`...)
	w.str(string(l.Kind))
	if l.CommonPrefixTokens != 0 {
		w.b = append(w.b, `,"common_prefix_tokens":`...)
		w.int(int64(l.CommonPrefixTokens))
	}
	if l.CommonPrefixMsgs != 0 {
		w.b = append(w.b, `,"common_prefix_messages":`...)
		w.int(int64(l.CommonPrefixMsgs))
	}
	w.b = append(w.b, `,"thread":`...)
	w.int(int64(l.Thread))
	w.b = append(w.b, '}')
}

// marshalMeta returns c's metadata through encoding/json: every field but
// the bodies, usage, call id and token ids and logprobs (the document
// carries them; the ids are null).
func marshalMeta(c *Call) ([]byte, error) {
	if err := checkLogprobs(c); err != nil {
		return nil, err
	}
	m := *c
	m.Request, m.Response, m.Usage = nil, nil, nil
	m.CallID = ""
	if c.Tokens != nil {
		t := *c.Tokens
		t.PromptIDs, t.CompletionIDs, t.Logprobs = nil, nil, nil
		if len(t.Choices) > 0 {
			t.Choices = make([]ChoiceTokens, len(c.Tokens.Choices))
			for i, ch := range c.Tokens.Choices {
				t.Choices[i] = ChoiceTokens{Index: ch.Index}
			}
		}
		m.Tokens = &t
	}
	b, err := json.Marshal(&m)
	if err != nil {
		return nil, fmt.Errorf("marshal call %s: %w", c.CallID, err)
	}
	return b, nil
}

// checkLogprobs rejects a call with a logprob that is NaN or infinite, as
// encoding/json would: the document could store it, but no reader could
// hand the call on as JSON.
func checkLogprobs(c *Call) error {
	t := c.Tokens
	if t == nil {
		return nil
	}
	f, ok := finite(t.Logprobs)
	for i := 0; ok && i < len(t.Choices); i++ {
		f, ok = finite(t.Choices[i].Logprobs)
	}
	if ok {
		return nil
	}
	err := &json.UnsupportedValueError{Str: strconv.FormatFloat(float64(f), 'g', -1, 32)}
	return fmt.Errorf("marshal call %s: %w", c.CallID, err)
}

// finite returns the first NaN or infinity in fs and false, or true.
func finite(fs []float32) (float32, bool) {
	for _, f := range fs {
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return f, false
		}
	}
	return 0, true
}
