package recorder

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
)

// EpisodeDecoder rebuilds the calls of one episode from their documents,
// fed in storage order. It keeps the ref lists of every call it decoded,
// since later documents name any earlier call as their base. It is not
// safe for concurrent use.
type EpisodeDecoder struct {
	hist history
}

// NewEpisodeDecoder returns a decoder for one episode.
func NewEpisodeDecoder() *EpisodeDecoder { return &EpisodeDecoder{} }

// Decode returns the call stored in docBytes, with Request, Response and
// Usage byte-identical to what was encoded. blocks must know every block
// of the episode stored before or with this document. Errors from bad
// input wrap [ErrCorrupt].
func (dc *EpisodeDecoder) Decode(docBytes []byte, blocks BlockSource) (*Call, error) {
	d, err := parseDoc(docBytes)
	if err != nil {
		return nil, err
	}
	refs, err := resolveRefs(&d, dc.hist.byID)
	if err != nil {
		return nil, err
	}
	c := new(Call)
	if err := json.Unmarshal(d.meta, c); err != nil {
		return nil, fmt.Errorf("call %s metadata: %w: %w", d.callID, ErrCorrupt, err)
	}
	c.CallID = d.callID
	if err := d.fillCompletion(c); err != nil {
		return nil, err
	}
	if c.Tokens != nil {
		refs.addCompletion(c.Tokens.CompletionIDs)
	}
	if d.hasToks {
		if c.Tokens == nil {
			return nil, fmt.Errorf("call %s: prompt ids without tokens: %w", d.callID, ErrCorrupt)
		}
		n := d.tokPrefix + len(d.tokTail)
		c.Tokens.PromptIDs = append(make([]int32, 0, n), refs.toks[:n]...)
	}
	if d.hasUsage {
		c.Usage = json.RawMessage(append([]byte{}, d.usage...))
	}
	var prompt []int32
	if c.Tokens != nil {
		prompt = c.Tokens.PromptIDs
	}
	if c.Request, err = joinBody(&d.req, blocks, nil); err != nil {
		return nil, fmt.Errorf("call %s request: %w", d.callID, err)
	}
	if c.Response, err = joinBody(&d.resp, blocks, prompt); err != nil {
		return nil, fmt.Errorf("call %s response: %w", d.callID, err)
	}
	dc.hist.add(d.callID, refs)
	return c, nil
}

// joinBody materializes a body from its skeleton and blocks, and a
// prompt-ids field from prompt (nil when the call has none).
func joinBody(b *docBody, blocks BlockSource, prompt []int32) (json.RawMessage, error) {
	switch b.kind {
	case bodyAbsent:
		return nil, nil
	case bodyLiteral:
		return append(json.RawMessage{}, b.literal...), nil
	}
	out := make([]byte, 0, 2*len(b.split.skeleton))
	prev := 0
	for _, f := range b.split.fields {
		out = append(out, b.split.skeleton[prev:f.hole]...)
		prev = f.hole
		if f.ids {
			if prompt == nil {
				return nil, fmt.Errorf("field %s: prompt ids without tokens: %w", f.key, ErrCorrupt)
			}
			out = appendIDsJSON(out, prompt)
			continue
		}
		elems := make([][]byte, len(f.refs))
		for i, h := range f.refs {
			data, ok := blocks(h)
			if !ok {
				return nil, fmt.Errorf("field %s: block %s missing: %w", f.key, h, ErrCorrupt)
			}
			elems[i] = data
		}
		if f.whole {
			out = append(out, elems[0]...)
		} else {
			out = joinArray(out, f, elems)
		}
	}
	return append(out, b.split.skeleton[prev:]...), nil
}

// sizeHint is about the length of d's binary form, so that appendTo
// writes it into one allocation instead of growing through ten.
func (d *doc) sizeHint() int {
	n := 64 + len(d.callID) + len(d.base) + len(d.meta) + len(d.usage) + 3*len(d.tokTail)
	if t := d.comp; t != nil {
		n += 8 * (len(t.CompletionIDs) + len(t.Logprobs))
		for _, ch := range t.Choices {
			n += 2 + 8*(len(ch.CompletionIDs)+len(ch.Logprobs))
		}
	}
	for _, kv := range d.metaSet {
		n += len(kv[0]) + len(kv[1]) + 4
	}
	for _, b := range []*docBody{&d.req, &d.resp} {
		n += len(b.literal) + len(b.layout) + 20*len(b.split.fields)
		if b.kind == bodySplit && b.layout == nil {
			n += b.split.skeletonLen() + 16
		}
		for _, f := range b.split.fields {
			n += 17 * len(f.refs)
		}
	}
	return n
}

// appendTo appends the binary form of d. Array fields carry only the refs
// after their base prefix.
func (d *doc) appendTo(dst []byte) []byte {
	w := wbuf{b: dst}
	w.byte1(docVersion)
	w.str(d.callID)
	w.str(d.base)
	if d.metaDelta {
		w.byte1(1)
		w.uvarint(uint64(len(d.metaSet)))
		for _, kv := range d.metaSet {
			w.str(kv[0])
			w.str(kv[1])
		}
		w.uvarint(uint64(len(d.metaDel)))
		for _, k := range d.metaDel {
			w.str(k)
		}
	} else {
		w.byte1(0)
		w.bytes(d.meta)
	}
	if d.hasUsage {
		w.byte1(1)
		w.bytes(d.usage)
	} else {
		w.byte1(0)
	}
	d.req.appendTo(&w)
	d.resp.appendTo(&w)
	if d.hasToks {
		w.byte1(1)
		w.uvarint(uint64(d.tokPrefix))
		w.uvarint(uint64(len(d.tokTail)))
		for _, id := range d.tokTail {
			w.varint(int64(id))
		}
	} else {
		w.byte1(0)
	}
	d.appendCompletion(&w)
	return w.b
}

// appendCompletion writes the completion ids and logprobs of d.comp, the
// top level's and then each choice's.
func (d *doc) appendCompletion(w *wbuf) {
	if d.comp == nil {
		w.byte1(0)
		return
	}
	w.byte1(1)
	w.ids(d.comp.CompletionIDs)
	w.floats(d.comp.Logprobs)
	w.uvarint(uint64(len(d.comp.Choices)))
	for i := range d.comp.Choices {
		w.ids(d.comp.Choices[i].CompletionIDs)
		w.floats(d.comp.Choices[i].Logprobs)
	}
}

// parseCompletion reads what appendCompletion wrote.
func parseCompletion(r *rbuf) *Tokens {
	if r.byte1("completion flag") == 0 {
		return nil
	}
	t := &Tokens{CompletionIDs: r.ids("completion ids"), Logprobs: r.floats("logprobs")}
	if n := r.count("choices", 2); n > 0 {
		t.Choices = make([]ChoiceTokens, n)
		for i := range t.Choices {
			t.Choices[i] = ChoiceTokens{CompletionIDs: r.ids("choice completion ids"), Logprobs: r.floats("choice logprobs")}
		}
	}
	return t
}

// fillCompletion sets the completion ids and logprobs of c, decoded from
// a version 3 document's metadata (which holds nulls in their place), from
// the document.
func (d *doc) fillCompletion(c *Call) error {
	t := c.Tokens
	switch {
	case d.version < docVersion:
		return nil
	case d.comp == nil && t == nil:
		return nil
	case d.comp == nil || t == nil:
		return fmt.Errorf("call %s: completion ids and metadata tokens disagree: %w", d.callID, ErrCorrupt)
	case len(t.Choices) != len(d.comp.Choices):
		return fmt.Errorf("call %s: %d choices of completion ids for %d in the metadata: %w", d.callID, len(d.comp.Choices), len(t.Choices), ErrCorrupt)
	}
	t.CompletionIDs, t.Logprobs = d.comp.CompletionIDs, d.comp.Logprobs
	for i := range t.Choices {
		t.Choices[i].CompletionIDs, t.Choices[i].Logprobs = d.comp.Choices[i].CompletionIDs, d.comp.Choices[i].Logprobs
	}
	return nil
}

func (b *docBody) appendTo(w *wbuf) {
	w.byte1(b.kind)
	switch b.kind {
	case bodyLiteral:
		w.bytes(b.literal)
		return
	case bodySplit:
		if b.layout != nil {
			w.bytes(b.layout)
		} else {
			w.appendLayoutOf(&b.split)
		}
	case bodySame:
	default:
		return
	}
	w.uvarint(uint64(len(b.split.fields)))
	for i, f := range b.split.fields {
		w.byte1(f.kind())
		switch {
		case f.whole:
			w.hash(f.refs[0])
			continue
		case f.ids:
			continue
		}
		w.uvarint(uint64(b.prefix[i]))
		w.hashes(f.refs[b.prefix[i]:])
	}
}

// appendLayout appends the part of a split body that agent calls repeat:
// the skeleton and each field's key, position and separators.
func appendLayout(dst []byte, s split) []byte {
	w := wbuf{b: dst}
	w.uvarint(uint64(s.skeletonLen()))
	w.b = s.appendSkeleton(w.b)
	return appendLayoutTail(w.b, s.fields)
}

// appendLayoutTail appends what a layout holds after its skeleton.
func appendLayoutTail(dst []byte, fs []field) []byte {
	w := wbuf{b: dst}
	w.uvarint(uint64(len(fs)))
	for _, f := range fs {
		w.str(f.key)
		w.uvarint(uint64(f.hole))
		w.byte1(f.kind())
		if f.whole || f.ids {
			continue
		}
		w.bytes(f.lead)
		w.bytes(f.sep)
		w.bytes(f.trail)
	}
	return w.b
}

// appendLayoutOf writes what w.bytes(appendLayout(nil, s)) writes, without
// building the layout apart: for a large response, whose skeleton (tens
// of KB with vLLM's logprobs) goes from the body into the document once.
func (w *wbuf) appendLayoutOf(s *split) {
	tail := appendLayoutTail(nil, s.fields)
	n := s.skeletonLen()
	w.uvarint(uint64(uvarintLen(uint64(n)) + n + len(tail)))
	w.uvarint(uint64(n))
	w.b = s.appendSkeleton(w.b)
	w.b = append(w.b, tail...)
}

func uvarintLen(v uint64) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], v)
}

// parseLayout reads what appendLayout wrote.
func parseLayout(layout []byte) (split, error) {
	r := rbuf{b: layout}
	var s split
	s.skeleton = r.bytes("skeleton")
	s.fields = make([]field, r.count("fields", 3))
	prev := 0
	for i := range s.fields {
		f := field{key: r.str("field key"), hole: r.small("field position")}
		if f.hole < prev || f.hole > len(s.skeleton) {
			r.fail("field position")
		}
		prev = f.hole
		if r.fieldKind(&f, "field kind", fieldIDs) == fieldArray {
			f.lead, f.sep, f.trail = r.bytes("lead"), r.bytes("separator"), r.bytes("trail")
		}
		s.fields[i] = f
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("layout end")
	}
	if r.err != nil {
		return split{}, fmt.Errorf("layout: %w: %w", ErrCorrupt, r.err)
	}
	return s, nil
}

// parseDoc reads a document without resolving its base or blocks.
func parseDoc(b []byte) (doc, error) {
	r := rbuf{b: b}
	v := r.byte1("version")
	if r.err == nil && (v < docVersion1 || v > docVersion) {
		return doc{}, fmt.Errorf("document version %d: %w", v, ErrCorrupt)
	}
	maxKind := byte(fieldWhole)
	if v >= docVersion2 {
		maxKind = fieldIDs
	}
	d := doc{version: v, callID: r.str("call id"), base: r.str("base")}
	if d.metaDelta = r.byte1("metadata kind") == 1; d.metaDelta {
		d.metaSet = make([][2]string, r.count("metadata keys", 2))
		for i := range d.metaSet {
			d.metaSet[i] = [2]string{r.str("metadata key"), r.str("metadata value")}
		}
		d.metaDel = make([]string, r.count("metadata deletions", 1))
		for i := range d.metaDel {
			d.metaDel[i] = r.str("metadata key")
		}
	} else {
		d.meta = r.bytes("metadata")
	}
	if d.hasUsage = r.byte1("usage flag") == 1; d.hasUsage {
		d.usage = r.bytes("usage")
	}
	d.req = parseBody(&r, "request", maxKind)
	d.resp = parseBody(&r, "response", maxKind)
	if d.hasToks = r.byte1("token flag") == 1; d.hasToks {
		d.tokPrefix = r.small("token prefix")
		d.tokTail = make([]int32, r.count("token ids", 1))
		for i := range d.tokTail {
			d.tokTail[i] = r.int32("token id")
		}
	}
	if v >= docVersion {
		d.comp = parseCompletion(&r)
	}
	if r.err == nil && len(r.b) != 0 {
		return doc{}, fmt.Errorf("%d bytes after the document: %w", len(r.b), ErrCorrupt)
	}
	if r.err != nil {
		return doc{}, fmt.Errorf("%w: %w", ErrCorrupt, r.err)
	}
	return d, nil
}

// parseBody reads a body whose fields are of kinds up to maxKind. A split
// body's fields get their shape from its layout in resolveLayout; here
// they only receive their refs.
func parseBody(r *rbuf, what string, maxKind byte) docBody {
	b := docBody{kind: r.byte1(what)}
	switch b.kind {
	case bodyAbsent:
		return b
	case bodyLiteral:
		b.literal = r.bytes(what)
		return b
	case bodySplit:
		b.layout = r.bytes(what + " layout")
	case bodySame:
	default:
		r.fail(what + " kind")
		return b
	}
	n := r.count(what+" fields", 2)
	b.split.fields = make([]field, n)
	b.prefix = make([]int, n)
	for i := range b.split.fields {
		f := &b.split.fields[i]
		switch r.fieldKind(f, what+" field kind", maxKind) {
		case fieldWhole:
			f.refs = []BlockHash{r.hash(what + " block")}
			continue
		case fieldIDs:
			continue
		}
		b.prefix[i] = r.small(what + " prefix")
		f.refs = r.hashes(what + " refs")
	}
	return b
}

// resolveLayout gives the fields of a split body their key, position and
// separators from its own layout or, for bodySame, from the base's.
func resolveLayout(b *docBody, base []byte) error {
	switch b.kind {
	case bodySame:
		if base == nil {
			return fmt.Errorf("layout of the base's body, which has none: %w", ErrCorrupt)
		}
		b.layout = base
	case bodySplit:
	default:
		return nil
	}
	s, err := parseLayout(b.layout)
	if err != nil {
		return err
	}
	if len(s.fields) != len(b.split.fields) {
		return fmt.Errorf("%d fields with refs, layout has %d: %w", len(b.split.fields), len(s.fields), ErrCorrupt)
	}
	for i := range s.fields {
		if s.fields[i].kind() != b.split.fields[i].kind() {
			return fmt.Errorf("field %s: kind differs from layout: %w", s.fields[i].key, ErrCorrupt)
		}
		s.fields[i].refs = b.split.fields[i].refs
	}
	b.split = s
	return nil
}
