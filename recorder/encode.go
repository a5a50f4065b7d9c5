package recorder

import (
	"encoding/json"
	"fmt"
	"slices"
	"unsafe"
)

// encoderWindow is how many recent calls an encoder considers as the base
// of a new call. Interleaved threads (subagents) further apart than this
// only cost one full ref list each time they resume.
const encoderWindow = 16

// tokenWindow is how many of the latest calls keep their token sequences,
// body layouts and metadata in an encoder (see remember): enough for an
// agent's next call to find its thread's last call with three subagents
// interleaved.
const tokenWindow = 4

// EpisodeEncoder turns the calls of one episode into call documents and
// blocks. With dedup on, a call's large top-level values become
// content-addressed blocks shared within the episode, and each array
// field's ref list, like the prompt token ids, is stored as "the first k
// entries of base call B's, then these". A 200-turn episode thus costs
// O(turns) bytes instead of O(turns²).
//
// An encoder holds the episode's dedup state and is not safe for concurrent
// use. Encode assumes the backend durably stores every document and block
// it returns, in order; if a write fails, drop the encoder and rebuild one
// with [EpisodeEncoder.Observe] from what was stored. Several writers of the
// same episode may each keep their own encoder: documents name their base
// by call id, so they stay decodable in storage order.
type EpisodeEncoder struct {
	dedup bool
	known map[BlockHash]struct{}
	hist  history
}

// NewEpisodeEncoder returns an encoder for one episode. With dedup false,
// documents hold their bodies literally and reference no block.
func NewEpisodeEncoder(dedup bool) *EpisodeEncoder {
	return &EpisodeEncoder{dedup: dedup, known: map[BlockHash]struct{}{}}
}

// Encode returns c's call document and the blocks it references that the
// episode did not have yet. The returned slices share no memory with the
// encoder but block data aliases c.Request and c.Response. A caller done
// with docBytes may hand it back with [ReleaseDoc].
func (e *EpisodeEncoder) Encode(c *Call) (docBytes []byte, newBlocks []Block, err error) {
	pr := c.prep
	if !pr.valid(c, e.dedup) {
		pr = prepareCall(c, e.dedup)
	}
	// The metadata is marshalled here, into a recycled buffer that the
	// document copies, rather than when the call is prepared: queued calls
	// held it beside their token ids (a vLLM call's ids and logprobs as
	// text, some 11 KB), and it was a fifth of the token path's
	// allocations. What the encoder remembers of it is copied (see kept).
	meta, mm, err := marshalMetaMap(docBuf(0), c, e.dedup)
	if err != nil {
		return nil, nil, err
	}
	d := doc{callID: c.CallID, meta: meta, usage: c.Usage, hasUsage: c.Usage != nil}
	var prompt []int32
	if c.Tokens != nil && c.Tokens.PromptIDs != nil {
		d.hasToks, prompt = true, c.Tokens.PromptIDs
	}
	d.comp = c.Tokens
	d.req, d.resp = pr.req, pr.resp
	ph := &promptHashes{ids: prompt}
	base := e.chooseBase(&d, ph)
	d.tokTail = prompt
	if base != nil {
		if base.meta != nil {
			d.metaDelta = true
			d.metaSet, d.metaDel = mm.diff(base.meta)
		}
		d.base = e.hist.order[e.baseIndex(base)]
		d.req.prefix = fieldPrefixes(d.req.split.fields, base.req)
		d.resp.prefix = fieldPrefixes(d.resp.split.fields, base.resp)
		d.req.sameLayout(base.layouts[0])
		d.resp.sameLayout(base.layouts[1])
		d.tokPrefix = base.seq.prefix(ph)
		d.tokTail = prompt[d.tokPrefix:]
	}
	newBlocks = e.collectNew(&d.req, newBlocks)
	newBlocks = e.collectNew(&d.resp, newBlocks)
	e.remember(c.CallID, &d, c.Tokens, ph, mm, base)
	docBytes = d.appendTo(docBuf(d.sizeHint()))
	ReleaseDoc(meta)
	releaseMetaMap(mm)
	return docBytes, newBlocks, nil
}

// Observe feeds a stored document of this episode to the encoder, so that an
// encoder rebuilt after a restart (or a failed write) deduplicates against
// what is already stored. Documents must be observed in storage order, and
// before the encoder encodes: it then keeps only hashes of the token ids
// that observing needs in full.
func (e *EpisodeEncoder) Observe(docBytes []byte) error {
	d, err := parseDoc(docBytes)
	if err != nil {
		return err
	}
	refs, err := resolveRefs(&d, e.hist.byID)
	if err != nil {
		return err
	}
	hasTokens, comp, err := d.completionIDs()
	if err != nil {
		return err
	}
	if hasTokens {
		refs.addCompletion(comp)
	}
	if d.hasToks || hasTokens {
		var base *tokSeq
		if b := e.hist.byID[d.base]; b != nil {
			base = b.seq
		}
		refs.seq = newTokSeq(&promptHashes{ids: refs.toks}, nil, base)
	}
	for _, f := range d.req.split.fields {
		e.markKnown(f.refs)
	}
	for _, f := range d.resp.split.fields {
		e.markKnown(f.refs)
	}
	e.hist.add(d.callID, refs)
	return nil
}

// completionIDs reports whether a stored call has token ids, and its
// completion ids: a version 3 document's own, an older one's from its
// metadata.
func (d *doc) completionIDs() (bool, []int32, error) {
	if d.version >= docVersion {
		if d.comp == nil {
			return false, nil, nil
		}
		return true, d.comp.CompletionIDs, nil
	}
	var meta struct {
		Tokens *struct {
			CompletionIDs []int32 `json:"completion_ids"`
		} `json:"tokens"`
	}
	if err := json.Unmarshal(d.meta, &meta); err != nil {
		return false, nil, fmt.Errorf("call %s metadata: %w: %w", d.callID, ErrCorrupt, err)
	}
	if meta.Tokens == nil {
		return false, nil, nil
	}
	return true, meta.Tokens.CompletionIDs, nil
}

func (e *EpisodeEncoder) markKnown(hs []BlockHash) {
	for _, h := range hs {
		e.known[h] = struct{}{}
	}
}

// prepared is the part of encoding a call that needs no episode state: its
// bodies cut into fields and hashed blocks. The pipeline prepares each call
// on the goroutine that records it (see prepare), so that the single store
// writer, which had fallen behind at 64 clients with the CPU saturated,
// does little more than what depends on the episode (choosing a base, the
// deltas) and compression; the metadata is marshalled there too, so that a
// queued call does not hold it. It is read-only once made: Encode copies the
// docBodies it changes, and may run more than once for a call (a failed
// write, a replay).
type prepared struct {
	dedup     bool
	request   []byte // the bodies the cuts were made from
	response  []byte
	prompt    []int32
	req, resp docBody
}

// prepare stores in c what Encode needs that no episode state affects, for
// a dedup encoder (what the stores use; the spill file's encoding does not
// dedup and ignores it).
func prepare(c *Call) {
	c.prep = prepareCall(c, true)
}

// prepareCall prepares c for an encoder with this dedup setting, reusing
// c.prep's cuts when they are of the same bodies.
func prepareCall(c *Call, dedup bool) *prepared {
	pr := &prepared{dedup: dedup, request: c.Request, response: c.Response}
	if c.Tokens != nil && c.Tokens.PromptIDs != nil {
		pr.prompt = c.Tokens.PromptIDs
	}
	if old := c.prep; old != nil && old.cutsFor(c, dedup) {
		pr.req, pr.resp = old.req, old.resp
	} else {
		pr.req = cutBody(c.Request, requestKeys, nil, dedup, false)
		pr.resp = cutBody(c.Response, responseKeys(c.API), pr.prompt, dedup, true)
	}
	return pr
}

// valid reports whether pr was made for c's bodies as they are now, for an
// encoder with this dedup setting.
func (pr *prepared) valid(c *Call, dedup bool) bool {
	return pr != nil && pr.cutsFor(c, dedup)
}

// cutsFor reports whether pr's cuts are those of c's bodies for an encoder
// with this dedup setting.
func (pr *prepared) cutsFor(c *Call, dedup bool) bool {
	var prompt []int32
	if c.Tokens != nil {
		prompt = c.Tokens.PromptIDs
	}
	return pr.dedup == dedup && sameSlice(pr.request, c.Request) && sameSlice(pr.response, c.Response) && sameSlice(pr.prompt, prompt)
}

func sameSlice[T any](a, b []T) bool {
	return len(a) == len(b) && unsafe.SliceData(a) == unsafe.SliceData(b)
}

// cutBody splits body on the dedup keys (none without dedup) and on a
// prompt_token_ids field equal to prompt. With resp, a layout too large
// for an encoder to remember (see respLayout) is not built: the document
// writes it from the body (see wbuf.appendLayoutOf), so that a queued call
// does not hold a second copy of its response.
func cutBody(body []byte, keys map[string]bool, prompt []int32, dedup, resp bool) docBody {
	if body == nil {
		return docBody{kind: bodyAbsent}
	}
	if !dedup {
		keys = nil
	}
	if keys == nil && len(prompt) == 0 {
		return docBody{kind: bodyLiteral, literal: body}
	}
	s, ok := splitBody(body, keys, prompt)
	if !ok {
		return docBody{kind: bodyLiteral, literal: body}
	}
	b := docBody{kind: bodySplit, split: s, prefix: make([]int, len(s.fields))}
	if !resp || s.src == nil || s.skeletonLen() <= maxRespLayout {
		b.layout = appendLayout(nil, s)
	}
	return b
}

// sameLayout switches a split body to bodySame when its layout is the
// base's: agent requests keep their skeleton (model, stream, options) from
// turn to turn, and only the refs change.
func (b *docBody) sameLayout(base []byte) {
	if b.kind == bodySplit && b.layout != nil && base != nil && string(b.layout) == string(base) {
		b.kind = bodySame
	}
}

// chooseBase picks, among the recent calls, the one sharing the longest
// ref and token prefixes with d, or nil when none shares anything.
func (e *EpisodeEncoder) chooseBase(d *doc, prompt *promptHashes) *callRefs {
	if !e.dedup {
		return nil
	}
	var best *callRefs
	bestScore := 0
	for i := len(e.hist.order) - 1; i >= 0; i-- {
		cand := e.hist.byID[e.hist.order[i]]
		score := cand.seq.prefix(prompt)
		for _, f := range d.req.split.fields {
			score += commonPrefix(cand.req.get(f.key), f.refs) * 16 // a ref is worth 16 bytes, a token id ~2
		}
		for _, f := range d.resp.split.fields {
			score += commonPrefix(cand.resp.get(f.key), f.refs) * 16
		}
		if score > bestScore {
			best, bestScore = cand, score
		}
	}
	return best
}

func (e *EpisodeEncoder) baseIndex(base *callRefs) int {
	for i, id := range e.hist.order {
		if e.hist.byID[id] == base {
			return i
		}
	}
	panic("recorder: base call missing from history") // unreachable: chooseBase returns a history entry
}

func fieldPrefixes(fs []field, base fieldRefs) []int {
	p := make([]int, len(fs))
	for i, f := range fs {
		if !f.whole && !f.ids {
			p[i] = commonPrefix(base.get(f.key), f.refs)
		}
	}
	return p
}

func (e *EpisodeEncoder) collectNew(b *docBody, out []Block) []Block {
	for _, f := range b.split.fields {
		for i, h := range f.refs {
			if _, ok := e.known[h]; ok {
				continue
			}
			e.known[h] = struct{}{}
			out = append(out, Block{Hash: h, Data: f.data[i]})
		}
	}
	return out
}

func (e *EpisodeEncoder) remember(id string, d *doc, t *Tokens, prompt *promptHashes, mm metaMap, base *callRefs) {
	if !e.dedup {
		return
	}
	// The members a call shares with its base (or, without one, the
	// call before) share their memory too.
	share := base
	if share == nil && len(e.hist.order) > 0 {
		share = e.hist.byID[e.hist.order[len(e.hist.order)-1]]
	}
	var last metaMap
	if share != nil {
		last = share.meta
	}
	r := &callRefs{req: arrayRefs(d.req.split.fields), resp: arrayRefs(d.resp.split.fields), meta: mm.kept(last),
		layouts: [2][]byte{d.req.layout, respLayout(d.resp.layout)}}
	var baseSeq *tokSeq
	if base != nil {
		r.req.continueRefs(d.req.split.fields, d.req.prefix, base.req)
		r.resp.continueRefs(d.resp.split.fields, d.resp.prefix, base.resp)
		baseSeq = base.seq
	}
	if t != nil {
		r.seq = newTokSeq(prompt, t.CompletionIDs, baseSeq)
	}
	e.hist.add(id, r)
	e.hist.trim(encoderWindow)
	// Token sequences are kept only for the last tokenWindow calls: a
	// prompt of thousands of ids per remembered call made token-id
	// recording cost hundreds of MB over a thousand episodes, and an
	// agent's next prompt continues a recent call. An older base still
	// deduplicates blocks; its token delta starts at 0 (the whole prompt is
	// stored). Layouts and metadata go the same way: a response's skeleton
	// holds whatever is not split into blocks (vLLM's prompt_token_ids
	// among it), and an older base only loses the bodySame shortcut and
	// the metadata delta (a call's metadata, some 25 members, took a
	// quarter of the encoders' memory kept for up to sixteen calls). The ids
	// that observing kept are done with.
	for i, id := range e.hist.order {
		r := e.hist.byID[id]
		if r.toks != nil {
			r.toks, r.size = nil, 0
		}
		if i < len(e.hist.order)-tokenWindow {
			r.seq, r.layouts, r.meta, r.size = nil, [2][]byte{}, nil, 0 // a recount of what is left is cheap
		}
	}
}

// maxRespLayout is the largest response layout an encoder remembers.
const maxRespLayout = 512

// respLayout is the response layout an encoder remembers: none when it is
// large. A response's skeleton carries its id (and with vLLM its prompt ids),
// so it is almost never a later response's, and keeping kilobytes per call
// for that chance cost more than the rare full layout it saves.
func respLayout(l []byte) []byte {
	if len(l) > maxRespLayout {
		return nil
	}
	return l
}

// arrayRefs returns the refs of fs's array fields by key; of a key that
// comes twice (a body with a duplicate member), the last.
func arrayRefs(fs []field) fieldRefs {
	if len(fs) == 0 {
		return nil
	}
	out := make(fieldRefs, 0, len(fs))
	for _, f := range fs {
		if f.whole || f.ids {
			continue
		}
		if i := out.index(f.key); i >= 0 {
			out[i].refs = f.refs
		} else {
			out = append(out, keyRefs{key: f.key, refs: f.refs})
		}
	}
	return out
}

// resolveRefs completes d's array fields with the prefixes taken from its
// base call and returns the refs later calls may delta against.
// It also completes d.meta from the base. The returned toks hold the prompt
// ids only until the caller adds the completion ids (addCompletion).
func resolveRefs(d *doc, hist map[string]*callRefs) (*callRefs, error) {
	var base *callRefs
	if d.base != "" {
		base = hist[d.base]
		if base == nil {
			return nil, fmt.Errorf("call %s: base call %s not seen before it: %w", d.callID, d.base, ErrCorrupt)
		}
	} else {
		base = &callRefs{}
	}
	if err := resolveLayout(&d.req, base.layouts[0]); err != nil {
		return nil, fmt.Errorf("call %s request: %w", d.callID, err)
	}
	if err := resolveLayout(&d.resp, base.layouts[1]); err != nil {
		return nil, fmt.Errorf("call %s response: %w", d.callID, err)
	}
	if err := resolveBody(&d.req, base.req); err != nil {
		return nil, fmt.Errorf("call %s request: %w", d.callID, err)
	}
	if err := resolveBody(&d.resp, base.resp); err != nil {
		return nil, fmt.Errorf("call %s response: %w", d.callID, err)
	}
	r := &callRefs{req: arrayRefs(d.req.split.fields), resp: arrayRefs(d.resp.split.fields),
		layouts: [2][]byte{d.req.layout, d.resp.layout}}
	if err := resolveMeta(d, base, r); err != nil {
		return nil, err
	}
	if d.tokPrefix > len(base.toks) {
		return nil, fmt.Errorf("call %s: token prefix %d past base's %d: %w", d.callID, d.tokPrefix, len(base.toks), ErrCorrupt)
	}
	if d.hasToks {
		r.toks = extendToks(base, d.tokPrefix, d.tokTail)
	}
	return r, nil
}

// extendToks returns the first prefix ids of base's followed by tail, in
// a slice no other call appends to. When prefix is all of base's ids (an
// agent's next turn continues its last call), tail goes in base's spare
// capacity, which only the first such call may take: copying the whole
// context for every call was a third of the encoder's allocated bytes,
// and made a decoder's memory quadratic in the episode's turns.
func extendToks(base *callRefs, prefix int, tail []int32) []int32 {
	if base == nil {
		return append([]int32(nil), tail...)
	}
	return extendShared(base.toks, &base.lent, prefix, tail)
}

// extendShared returns the first prefix elements of base followed by tail.
// When prefix is all of base and *lent is false, it appends tail in base's
// spare capacity and sets *lent: the first continuation shares base's
// memory, and the others (forks) copy, so that none writes over another.
func extendShared[T any](base []T, lent *bool, prefix int, tail []T) []T {
	if !*lent && prefix > 0 && prefix == len(base) {
		*lent = true
		return append(base, tail...)
	}
	return append(append(make([]T, 0, prefix+len(tail)), base[:prefix]...), tail...)
}

// addCompletion appends a call's completion ids to its token sequence, which
// later calls' prompts extend.
func (r *callRefs) addCompletion(ids []int32) {
	if len(ids) > 0 {
		r.toks, r.size = append(r.toks, ids...), 0
	}
}

// resolveMeta sets d.meta to the full metadata JSON and r.meta to its map.
func resolveMeta(d *doc, base, r *callRefs) error {
	if !d.metaDelta {
		m, err := parseMeta(d.meta)
		if err != nil {
			return fmt.Errorf("call %s: %w", d.callID, err)
		}
		r.meta = m
		return nil
	}
	if base.meta == nil {
		return fmt.Errorf("call %s: metadata delta without a base: %w", d.callID, ErrCorrupt)
	}
	r.meta = base.meta.patch(d.metaSet, d.metaDel)
	d.meta = r.meta.json()
	return nil
}

func resolveBody(b *docBody, base fieldRefs) error {
	for i := range b.split.fields {
		f := &b.split.fields[i]
		k := b.prefix[i]
		if k == 0 {
			continue
		}
		src := base.get(f.key)
		if k > len(src) {
			return fmt.Errorf("field %s: prefix %d past base's %d refs: %w", f.key, k, len(src), ErrCorrupt)
		}
		f.refs = append(append(make([]BlockHash, 0, k+len(f.refs)), src[:k]...), f.refs...)
	}
	return nil
}

// Compact lets go of every remembered call but the latest, which is all an
// agent's next turn needs as its base: an episode that has gone quiet (its
// rollout done but never finished, or waiting on a long tool run) then
// holds a fraction of its state. A later call of the episode still
// deduplicates its blocks and its prompt against the latest call; only a
// subagent resuming a thread from before the latest call stores its
// prompt ids whole. Compact reports whether it let go of anything. An
// encoder is not observed once compacted.
func (e *EpisodeEncoder) Compact() bool {
	n := len(e.hist.order)
	if n <= 1 {
		return false
	}
	id := e.hist.order[n-1]
	r := e.hist.byID[id]
	r.toks, r.size = nil, 0
	// Fresh ones: a map keeps its buckets after deletes.
	e.hist = history{byID: map[string]*callRefs{id: r}, order: []string{id}}
	return true
}

// Bytes estimates the memory the encoder's dedup state holds: the block
// addresses it knows and the refs, token ids, layouts and metadata of the
// calls it remembers. Stores bound their encoders by it.
func (e *EpisodeEncoder) Bytes() int { return e.size((*callRefs).bytes) }

// size is Bytes with each remembered call's own part (its refs' and
// sequence's arrays aside) from perCall.
func (e *EpisodeEncoder) size(perCall func(*callRefs) int) int {
	n := 256 + len(e.known)*(len(BlockHash{})+mapEntry)
	arrays := make(sharedArrays, 0, 64) // on the stack unless it grows
	var k int
	for id, r := range e.hist.byID {
		n += len(id) + mapEntry + perCall(r)
		if r.seq != nil {
			k, arrays = countArray(arrays, r.seq.blocks, len(tokHash{})*8)
			n += k
		}
		for _, refs := range [2]fieldRefs{r.req, r.resp} {
			for _, kr := range refs {
				k, arrays = countArray(arrays, kr.refs, len(BlockHash{}))
				n += k
			}
		}
	}
	return n
}

// sharedArrays counts the arrays behind the slices an encoder keeps, each
// once however many calls' slices share it (see extendShared).
type sharedArrays []unsafe.Pointer

// countArray returns the size of s's array, elem bytes per element of its
// capacity, unless a counted it before, and a with that array added.
func countArray[T any](a sharedArrays, s []T, elem int) (int, sharedArrays) {
	p := unsafe.Pointer(unsafe.SliceData(s))
	if p == nil || slices.Contains(a, p) {
		return 0, a
	}
	return cap(s) * elem, append(a, p)
}

func (r *callRefs) bytes() int {
	if r.size == 0 {
		r.size = r.count()
	}
	return r.size
}

// mapEntry is what Bytes counts per map entry beyond its key and value,
// metaEntry per metadata member.
const (
	mapEntry  = 48
	metaEntry = 32
)

func (r *callRefs) count() int {
	n := 128 + len(r.layouts[0]) + len(r.layouts[1]) + 4*len(r.toks) + r.seq.bytes()
	for _, refs := range [2]fieldRefs{r.req, r.resp} {
		n += 24
		for _, kr := range refs {
			n += len(kr.key) + 48 // and the refs' array: Bytes
		}
	}
	for _, kv := range r.meta {
		n += metaEntry + len(kv.k) + len(kv.v) // shared strings count in every call
	}
	return n
}
