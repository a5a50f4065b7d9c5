package recorder

import (
	"hash/maphash"
	"unsafe"
)

// tokBlock is how many token ids one hash of a tokSeq covers.
const tokBlock = 64

// tokSeq is what an encoder keeps of a call's token sequence (its prompt
// ids, then its completion ids) to find how much of a later prompt repeats
// it: a hash of each whole block of tokBlock ids but the last, and the
// last tokBlock to 2*tokBlock-1 ids themselves. A next turn's prompt
// usually parts from the sequence there (the chat template closes the
// completion its own way), so the common prefix is found to the id there,
// and to the block before anywhere else: a call then stores fewer than
// tokBlock ids it could have taken from its base.
//
// It takes a sixteenth of the ids' memory. Keeping the ids made the
// encoders hold 24 KB per episode in the load benchmark (a third of the
// proxy's live heap at 256 streams on the token path), and an agent with
// a 30,000-token context 240 KB, so that the encoders' byte bound held
// few long-context episodes.
type tokSeq struct {
	blocks []tokHash // may extend the blocks of the sequence it continues, in their spare capacity
	lent   bool      // blocks' spare capacity belongs to a later sequence's
	tail   []int32   // the ids after the blocks
}

// tokHash is a 128-bit hash of a block of ids, from two seeded 64-bit
// hashes. The seeds are the process's own and the hashes never leave it,
// so no input can be made to collide; by chance, two different blocks
// collide once in 2^128 comparisons. That is what lets a prefix be
// trusted without the ids, as block addresses are in the store.
type tokHash [2]uint64

var tokSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

func hashIDs(ids []int32) tokHash {
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(ids))), 4*len(ids))
	return tokHash{maphash.Bytes(tokSeeds[0], b), maphash.Bytes(tokSeeds[1], b)}
}

// promptHashes hashes a prompt's whole blocks as they are asked for, each
// once however many sequences it is compared with.
type promptHashes struct {
	ids []int32
	hs  []tokHash
}

// at returns the hash of the prompt's block k, which must be whole.
func (p *promptHashes) at(k int) tokHash {
	if p.hs == nil {
		p.hs = make([]tokHash, 0, len(p.ids)/tokBlock)
	}
	for len(p.hs) <= k {
		i := len(p.hs) * tokBlock
		p.hs = append(p.hs, hashIDs(p.ids[i:i+tokBlock]))
	}
	return p.hs[k]
}

// prefix returns how many leading ids of p's prompt s's sequence shares,
// to the id within s's tail and to a block boundary before it.
func (s *tokSeq) prefix(p *promptHashes) int {
	if s == nil {
		return 0
	}
	k := 0
	for k < len(s.blocks) && (k+1)*tokBlock <= len(p.ids) && p.at(k) == s.blocks[k] {
		k++
	}
	if k < len(s.blocks) {
		return k * tokBlock
	}
	return k*tokBlock + commonPrefix(s.tail, p.ids[k*tokBlock:])
}

// newTokSeq returns the sequence of p's prompt followed by completion. When
// the prompt continues all of base's blocks (an agent's next turn), the
// sequence's blocks extend base's, shared, so that a long episode's recent
// calls do not each hold their context's hashes.
func newTokSeq(p *promptHashes, completion []int32, base *tokSeq) *tokSeq {
	n := len(p.ids) + len(completion)
	nb := max(0, n/tokBlock-1)
	inPrompt := min(nb, len(p.ids)/tokBlock)
	s := &tokSeq{tail: make([]int32, 0, n-nb*tokBlock)}
	if shared := base.sharedBlocks(p, inPrompt); shared > 0 && !base.lent {
		s.blocks, base.lent = base.blocks, true
	} else {
		s.blocks = make([]tokHash, 0, nb)
	}
	for k := len(s.blocks); k < inPrompt; k++ {
		s.blocks = append(s.blocks, p.at(k))
	}
	// The blocks after the prompt's whole ones join its last ids to the
	// completion's.
	var block [tokBlock]int32
	rest, more := p.ids[inPrompt*tokBlock:], completion
	for k := inPrompt; k < nb; k++ {
		b := append(block[:0], rest[:min(len(rest), tokBlock)]...)
		rest = rest[len(b):]
		m := tokBlock - len(b)
		b, more = append(b, more[:m]...), more[m:]
		s.blocks = append(s.blocks, hashIDs(b))
	}
	s.tail = append(append(s.tail, rest...), more...)
	return s
}

// sharedBlocks returns len(s.blocks) if p's prompt begins with them and has
// at least as many whole blocks (inPrompt), else 0.
func (s *tokSeq) sharedBlocks(p *promptHashes, inPrompt int) int {
	if s == nil || len(s.blocks) == 0 || len(s.blocks) > inPrompt {
		return 0
	}
	for k, h := range s.blocks {
		if p.at(k) != h {
			return 0
		}
	}
	return len(s.blocks)
}

// bytes estimates the memory s holds but its blocks' array, which
// EpisodeEncoder.Bytes counts once for the sequences that share it.
func (s *tokSeq) bytes() int {
	if s == nil {
		return 0
	}
	return 48 + 4*len(s.tail)
}
