package lineage

import (
	"math/bits"
	"slices"
	"sort"
)

// blockSize is the distance, in units, between the checkpoints kept for
// each thread tip. LCP against a tip costs O(log(n/blockSize) + blockSize).
const blockSize = 64

// The chain hash is an xxHash64-style round: a bijection of the accumulator
// for a fixed unit, so two sequences of equal length collide only by chance
// (about 2^-64 per pair; inputs are not adversarial).
const (
	prime1    = 11400714785074694791
	prime2    = 14029467366897019727
	prime3    = 1609587929392839161
	chainSeed = 0x27d4eb2f165667c5
)

func round(acc, v uint64) uint64 {
	acc += v * prime2
	acc = bits.RotateLeft64(acc, 31)
	return acc * prime1
}

// key finalises a chain hash of n units into an index key.
func key(h uint64, n int) uint64 {
	h = round(h, uint64(n)^0x9e3779b97f4a7c15)
	h ^= h >> 33
	h *= prime2
	h ^= h >> 29
	h *= prime3
	h ^= h >> 32
	return h
}

// unit is what a sequence is made of: token ids, message hashes, or bytes
// of a completions prompt.
type unit interface{ ~int32 | ~uint64 | ~uint8 }

// seqInput is one call seen in one space: its prompt, the outputs of its
// choices (outs[0] is the one a thread tip keeps), sizes for the
// compaction rule, and the length of its system prefix.
type seqInput[E unit] struct {
	prompt     []E
	outs       [][]E
	promptSize int64 // bytes (messages) or units (tokens, text)
	outSize    int64 // size of outs[0]
	sys        int   // leading units that form the system prefix; 0 when unstructured
}

// match is what an index lookup found for the current input: the latest
// earlier call with the same prompt, and the earlier call whose
// prompt+output is the longest prefix of the current prompt.
type match struct {
	retry  int32
	ext    int32
	extLen int
}

// tip is the last call of a thread in one space. It is the only place a
// space keeps units; every other call is a few hashes in the indexes.
type tip[E unit] struct {
	call      int32
	units     []E      // prompt + outs[0]
	cps       []uint64 // cps[i] is the chain hash of units[:(i+1)*blockSize]
	promptLen int
	sys       int
	size      int64
	tick      int64
}

// space indexes one kind of sequence (token ids, the messages of one API,
// or completions text) for one episode. It is not safe for concurrent use;
// the episode's lock guards it.
type space[E unit] struct {
	structured bool              // units are messages with a system prefix
	prompts    map[uint64]int32  // key(prompt) -> latest call
	fulls      map[uint64]int32  // key(prompt+out) -> latest call, for every choice
	lens       []int             // sorted distinct lengths of the keys in fulls
	tips       []*tip[E]         // by thread; nil where the tip call had no data here
	memo       map[uint64]uint64 // message spaces: see [extractor]

	// The current input, set by scan and used until commit.
	in  *seqInput[E]
	h   uint64   // chain hash of in.prompt
	cps []uint64 // checkpoints of in.prompt
	m   match

	work int64 // units hashed or compared; tests assert linearity with it
}

func newSpace[E unit](structured bool) *space[E] {
	return &space[E]{
		structured: structured,
		prompts:    make(map[uint64]int32),
		fulls:      make(map[uint64]int32),
	}
}

// scan hashes in.prompt once, probing the fulls index at every length some
// earlier call's prompt+output had, and the prompts index at its end.
func (s *space[E]) scan(in *seqInput[E]) match {
	s.in = in
	s.cps = s.cps[:0]
	m := match{retry: -1, ext: -1}
	h := uint64(chainSeed)
	p := in.prompt
	li := 0
	for i := 0; ; i++ {
		for li < len(s.lens) && s.lens[li] == i {
			if c, ok := s.fulls[key(h, i)]; ok {
				m.ext, m.extLen = c, i
			}
			li++
		}
		if i == len(p) {
			break
		}
		h = round(h, uint64(p[i]))
		if (i+1)%blockSize == 0 {
			s.cps = append(s.cps, h)
		}
	}
	s.work += int64(len(p))
	if c, ok := s.prompts[key(h, len(p))]; ok {
		m.retry = c
	}
	s.h, s.m = h, m
	return m
}

// tipOf returns the thread's tip in this space, or nil.
func (s *space[E]) tipOf(thread int32) *tip[E] {
	if int(thread) < len(s.tips) {
		return s.tips[thread]
	}
	return nil
}

// lcp returns the length of the longest common prefix of the current
// prompt and t.units: a binary search over checkpoints, then at most one
// block compared unit by unit.
func (s *space[E]) lcp(t *tip[E]) int {
	p := s.in.prompt
	n := min(len(s.cps), len(t.cps))
	b := sort.Search(n, func(i int) bool { return s.cps[i] != t.cps[i] })
	k, end := b*blockSize, min(len(p), len(t.units))
	start := k
	for k < end && p[k] == t.units[k] {
		k++
	}
	s.work += int64(k-start) + 1
	return k
}

// best returns the tip sharing the longest prefix with the current prompt;
// ties go to the most recently updated tip.
func (s *space[E]) best() (thread int32, lcp int, ok bool) {
	var bt *tip[E]
	for i, t := range s.tips {
		if t == nil {
			continue
		}
		k := s.lcp(t)
		if bt == nil || k > lcp || (k == lcp && t.tick > bt.tick) {
			bt, thread, lcp = t, int32(i), k
		}
	}
	return thread, lcp, bt != nil
}

// retained reports which fraction of t's units from index `from` on are
// kept by the current prompt: units before the common prefix j count as
// kept, the others when they occur in the current prompt after j. For
// unstructured spaces, whose units are not messages, it is the fraction of
// t that is common prefix.
func (s *space[E]) retained(t *tip[E], j, from int) float64 {
	if !s.structured {
		if len(t.units) == 0 {
			return 1
		}
		return float64(j) / float64(len(t.units))
	}
	old := t.units[min(from, len(t.units)):]
	if len(old) == 0 {
		return 1
	}
	seen := make(map[E]struct{}, len(s.in.prompt))
	for _, u := range s.in.prompt[min(j, len(s.in.prompt)):] {
		seen[u] = struct{}{}
	}
	kept := 0
	for i, u := range old {
		if _, ok := seen[u]; ok || from+i < j {
			kept++
		}
	}
	s.work += int64(len(s.in.prompt) + len(old))
	return float64(kept) / float64(len(old))
}

// commit records the current input as call ci of thread: it indexes its
// prompt and every choice's prompt+output, and makes it the thread's tip.
func (s *space[E]) commit(ci, thread int32, tick int64) {
	in := s.in
	n := len(in.prompt)
	s.prompts[key(s.h, n)] = ci
	if len(in.outs) == 0 {
		s.addFull(key(s.h, n), n, ci)
	}
	for _, out := range in.outs {
		h := s.h
		for _, u := range out {
			h = round(h, uint64(u))
		}
		s.work += int64(len(out))
		s.addFull(key(h, n+len(out)), n+len(out), ci)
	}
	for int(thread) >= len(s.tips) {
		s.tips = append(s.tips, nil)
	}
	t := s.tips[thread]
	k := 0
	if t == nil {
		t = &tip[E]{}
		s.tips[thread] = t
	} else {
		k = s.lcp(t)
	}
	t.units = append(t.units[:k], in.prompt[k:]...)
	if len(in.outs) > 0 {
		t.units = append(t.units, in.outs[0]...)
	}
	if cap(t.units) > 4*len(t.units)+1024 { // after a compaction, give the memory back
		t.units = slices.Clone(t.units)
	}
	s.rehash(t, k)
	t.call, t.promptLen, t.sys, t.tick = ci, n, in.sys, tick
	t.size = in.promptSize + in.outSize
	s.in = nil
}

func (s *space[E]) addFull(k uint64, n int, ci int32) {
	s.fulls[k] = ci
	if i, found := slices.BinarySearch(s.lens, n); !found {
		s.lens = slices.Insert(s.lens, i, n)
	}
}

// rehash recomputes t's checkpoints from the block that holds unit k on.
func (s *space[E]) rehash(t *tip[E], k int) {
	b := k / blockSize
	t.cps = t.cps[:min(b, len(t.cps))]
	h := uint64(chainSeed)
	if b > 0 {
		h = t.cps[b-1]
	}
	for i := b * blockSize; i < len(t.units); i++ {
		h = round(h, uint64(t.units[i]))
		if (i+1)%blockSize == 0 {
			t.cps = append(t.cps, h)
		}
	}
	s.work += int64(len(t.units) - b*blockSize)
}

// drop forgets the thread's tip: its new tip call has no data here.
func (s *space[E]) drop(thread int32) {
	if int(thread) < len(s.tips) {
		s.tips[thread] = nil
	}
	s.in = nil
}

// The methods below make a space a [view] of the current input.

func (s *space[E]) scanned() match     { return s.m }
func (s *space[E]) promptLen() int     { return len(s.in.prompt) }
func (s *space[E]) inputSize() int64   { return s.in.promptSize }
func (s *space[E]) isStructured() bool { return s.structured }

func (s *space[E]) hasTips() bool {
	for _, t := range s.tips {
		if t != nil {
			return true
		}
	}
	return false
}

func (s *space[E]) tipLCP(call, thread int32) (int, bool) {
	t := s.tipOf(thread)
	if t == nil || t.call != call {
		return 0, false
	}
	return s.lcp(t), true
}

func (s *space[E]) tipFacts(thread int32) (tipFacts, bool) {
	t := s.tipOf(thread)
	if t == nil {
		return tipFacts{call: -1}, false
	}
	return tipFacts{call: t.call, fullLen: len(t.units), promptLen: t.promptLen, sys: t.sys, size: t.size}, true
}

func (s *space[E]) retainedIn(thread int32, j int, after bool) float64 {
	t := s.tipOf(thread)
	if t == nil {
		return 0
	}
	from := t.sys
	if after {
		from = j
	}
	return s.retained(t, j, from)
}
