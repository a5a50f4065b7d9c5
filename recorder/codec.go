package recorder

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
)

// BlockHash is the content address of a block: the first 16 bytes of the
// SHA-256 of the block's bytes.
type BlockHash [16]byte

// HashBlock returns the address of data.
func HashBlock(data []byte) BlockHash {
	sum := sha256.Sum256(data)
	return BlockHash(sum[:16])
}

// String returns h in hex, the form backends may use as a key.
func (h BlockHash) String() string { return hex.EncodeToString(h[:]) }

// Block is a deduplicated piece of a request or response: one element of a
// large top-level array (a message, an input item, a tool) or one large
// top-level value. Blocks are shared by all calls of an episode.
type Block struct {
	Hash BlockHash
	Data []byte
}

// BlockSource returns the bytes of a block of the episode being decoded,
// reporting false when the block is unknown.
type BlockSource func(BlockHash) ([]byte, bool)

// ErrCorrupt is wrapped by every decoding error caused by bad input.
var ErrCorrupt = errors.New("corrupt record")

// docVersion is the first byte of every call document written now.
// Version 2 added the prompt-ids field kind (fieldIDs): a response's
// prompt_token_ids is filled from the call's prompt ids instead of being
// stored a second time. Version 3 stores the completion ids and logprobs
// (tokens.completion_ids and tokens.logprobs, and each choice's) after the
// prompt ids, as varints and as float32 bits, rather than as JSON numbers
// in the metadata, which holds nulls in their place: marshalling a vLLM
// call's metadata, its logprobs as text, and compressing the documents
// were 5.2% and 5.0% of the proxy's CPU at 64 token streams, 0.9% and 3.0%
// after. Version 1 and 2 documents still decode.
const (
	docVersion  = 3
	docVersion2 = 2
	docVersion1 = 1
)

// Field kinds in a document and in a layout.
const (
	fieldArray = 0 // element refs after a prefix from the base
	fieldWhole = 1 // one block
	fieldIDs   = 2 // the call's prompt ids as compact JSON; version 2 only
)

func (f *field) kind() byte {
	switch {
	case f.whole:
		return fieldWhole
	case f.ids:
		return fieldIDs
	}
	return fieldArray
}

// Body kinds in a call document.
const (
	bodyAbsent  = 0
	bodyLiteral = 1
	bodySplit   = 2 // layout (skeleton and field shapes), then refs
	bodySame    = 3 // the base call's layout for this body, then refs
)

// callRefs is what later calls of the episode may delta-encode against.
type callRefs struct {
	req, resp fieldRefs // array fields' element refs by key
	layouts   [2][]byte // request and response layouts (see docBody)
	toks      []int32   // prompt ids followed by completion ids (a decoder's, and an encoder's while it observes)
	lent      bool      // toks' spare capacity belongs to a later call's toks (see extendToks)
	seq       *tokSeq   // an encoder's: what it keeps of toks
	meta      metaMap
	size      int // bytes' answer, 0 until asked or after toks and layouts change
}

// fieldRefs are a body's array fields' element refs by key: a few keys
// (messages, tools), so a slice rather than a map, which took 400 bytes per
// remembered call.
type fieldRefs []keyRefs

type keyRefs struct {
	key  string
	refs []BlockHash // an encoder's may extend a base's, in its spare capacity (continueRefs)
	lent bool        // refs' spare capacity belongs to a later call's refs
}

// continueRefs makes each of f's refs that continues all of base's refs of
// its key (prefix, per field of fs, says how many it takes) extend base's,
// shared: an agent's calls each repeat their episode's whole message list,
// and the recent calls an encoder keeps held a copy each. f is
// arrayRefs(fs).
func (f fieldRefs) continueRefs(fs []field, prefix []int, base fieldRefs) {
	for i, fl := range fs {
		j := f.index(fl.key)
		if j < 0 || prefix == nil || prefix[i] == 0 || !sameSlice(f[j].refs, fl.refs) {
			continue // not an array field, or a duplicate key's earlier field
		}
		b := base.index(fl.key)
		if b >= 0 && prefix[i] == len(base[b].refs) && !base[b].lent {
			f[j].refs = extendShared(base[b].refs, &base[b].lent, prefix[i], fl.refs[prefix[i]:])
		}
	}
}

// index returns the position of key's refs in f, or -1.
func (f fieldRefs) index(key string) int {
	return slices.IndexFunc(f, func(kr keyRefs) bool { return kr.key == key })
}

// get returns the refs of key, nil when there are none.
func (f fieldRefs) get(key string) []BlockHash {
	if i := f.index(key); i >= 0 {
		return f[i].refs
	}
	return nil
}

// history maps call ids to their refs, remembering arrival order.
type history struct {
	byID  map[string]*callRefs
	order []string
}

func (h *history) add(id string, r *callRefs) {
	if h.byID == nil {
		h.byID = map[string]*callRefs{}
	}
	if _, dup := h.byID[id]; !dup {
		h.order = append(h.order, id)
	}
	h.byID[id] = r
}

// trim forgets all but the last n calls.
func (h *history) trim(n int) {
	for len(h.order) > n {
		delete(h.byID, h.order[0])
		h.order = h.order[1:]
	}
}

// doc is a parsed call document, before its bodies are materialized.
type doc struct {
	version      byte // the decode side's; the encode side writes docVersion
	callID, base string
	meta, usage  []byte      // meta: full JSON, after resolveRefs on the decode side
	metaDelta    bool        // meta is stored as metaSet/metaDel against the base
	metaSet      [][2]string // changed keys and raw values
	metaDel      []string    // keys the base has and this call lacks
	hasUsage     bool
	req, resp    docBody
	hasToks      bool
	tokPrefix    int
	tokTail      []int32
	// comp holds the completion ids and logprobs (version 3): on the
	// encode side the call's Tokens, on the decode side a Tokens with only
	// those (and each choice's) set. nil: the call has no Tokens.
	comp *Tokens
}

// docBody is one body of a doc: absent, a literal, or a split body whose
// array fields carry only the refs after their prefix from the base call.
type docBody struct {
	kind    byte
	literal []byte
	split   split
	prefix  []int  // per field: refs taken from the base call's same key
	layout  []byte // encoded skeleton and field shapes of a split body
}

// commonPrefix returns how many leading entries a and b share.
func commonPrefix[T comparable](a, b []T) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}
