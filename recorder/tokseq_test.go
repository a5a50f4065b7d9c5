package recorder

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestTokSeqPrefix compares a sequence's prefix with a prompt against the
// ids' common prefix, for a prompt that parts from it at every position
// and for prompts shorter and longer than it: exact to the id from the
// sequence's tail on, the block boundary before the parting elsewhere.
func TestTokSeqPrefix(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 63, 64, 65, 127, 128, 129, 300, 1000} {
		full := make([]int32, n)
		for i := range full {
			full[i] = rng.Int32N(150000)
		}
		for _, cut := range []int{0, n / 3, n} { // where the prompt/completion boundary is
			s := newTokSeq(&promptHashes{ids: full[:cut]}, full[cut:], nil)
			if len(s.blocks)*tokBlock+len(s.tail) != n || (n >= tokBlock && len(s.tail) < tokBlock) || len(s.tail) >= 2*tokBlock {
				t.Fatalf("n=%d cut=%d: %d blocks and %d tail ids", n, cut, len(s.blocks), len(s.tail))
			}
			if want := newTokSeq(&promptHashes{ids: full}, nil, nil); !slices.Equal(s.blocks, want.blocks) || !slices.Equal(s.tail, want.tail) {
				t.Fatalf("n=%d cut=%d: the sequence depends on where the prompt ends", n, cut)
			}
			for part := 0; part <= n+1; part++ {
				prompt := append(slices.Clone(full[:min(part, n)]), 7, 7, 7)
				if part < n {
					prompt[part] = full[part] + 1
				}
				for _, p := range [][]int32{prompt, prompt[:min(part, n)], prompt[:len(prompt)*2/3]} {
					checkPrefix(t, s, full, p, fmt.Sprintf("n=%d cut=%d part=%d len=%d", n, cut, part, len(p)))
				}
			}
		}
	}
}

func checkPrefix(t *testing.T, s *tokSeq, full, prompt []int32, name string) {
	t.Helper()
	cp := commonPrefix(full, prompt)
	want := cp
	if cp < len(s.blocks)*tokBlock {
		want = cp / tokBlock * tokBlock
	}
	if got := s.prefix(&promptHashes{ids: prompt}); got != want {
		t.Errorf("%s: prefix %d, want %d (ids share %d)", name, got, want, cp)
	}
}

// TestEncoderTokenPrefix encodes an agent's episode, whose every prompt
// continues the call before (prompt and completion ids), and checks that
// each call stores only its new ids, and that the encoder's memory for a
// 30,000-id context is a fraction of the ids'.
func TestEncoderTokenPrefix(t *testing.T) {
	calls := growingEpisode(12, 4000)
	enc := NewEpisodeEncoder(true)
	for i, c := range calls {
		docBytes, _, err := enc.Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		d, err := parseDoc(docBytes)
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		if i > 0 {
			want = len(calls[i-1].Tokens.PromptIDs) + len(calls[i-1].Tokens.CompletionIDs)
		}
		if d.tokPrefix != want || len(d.tokTail) != len(c.Tokens.PromptIDs)-want {
			t.Errorf("call %d: prefix %d and %d new ids, want %d and %d", i, d.tokPrefix, len(d.tokTail), want, len(c.Tokens.PromptIDs)-want)
		}
	}
	long := testCall("ep", "long", 1)
	long.Tokens = &Tokens{PromptIDs: ids(1, 30000), CompletionIDs: ids(2, 500)}
	enc = NewEpisodeEncoder(true)
	before := enc.Bytes()
	if _, _, err := enc.Encode(long); err != nil {
		t.Fatal(err)
	}
	// 30,500 ids: 475 block hashes of 16 bytes and 100 ids.
	if got, idBytes := enc.Bytes()-before, 4*30500; got > idBytes/12 {
		t.Errorf("the encoder holds %d bytes more for a call of %d bytes of ids", got, idBytes)
	}
}

func BenchmarkTokSeq(b *testing.B) {
	prev := ids(1, 30000)
	next := append(slices.Clone(prev), ids(2, 500)...)
	s := newTokSeq(&promptHashes{ids: prev}, nil, nil)
	b.SetBytes(4 * int64(len(next)))
	for b.Loop() {
		p := &promptHashes{ids: next}
		if s.prefix(p) != len(prev) {
			b.Fatal("prefix")
		}
		newTokSeq(p, ids(3, 200), s)
	}
}

// FuzzTokenDelta encodes an episode of three calls whose prompts repeat
// parts of the calls before (the fuzzer picks how much, and what differs
// after), rebuilds the encoder from the stored documents halfway, and
// checks that every call's ids read back exactly: a prefix the hashes
// found must be one the ids share.
func FuzzTokenDelta(f *testing.F) {
	f.Add(uint16(300), uint16(200), uint16(250), uint16(64), []byte{1, 2, 3})
	f.Add(uint16(129), uint16(129), uint16(128), uint16(0), []byte{})
	f.Fuzz(func(t *testing.T, n, cut, keep1, keep2 uint16, extra []byte) {
		n, cut = n%2000, cut%2000
		full := ids(int(n), int(n))
		cut = min(cut, n)
		first := testCall("ep", "a", 1)
		first.Tokens = &Tokens{PromptIDs: full[:cut], CompletionIDs: full[cut:]}
		next := func(id string, prev []int32, keep uint16) *Call {
			k := int(keep) % (len(prev) + 1)
			p := slices.Clone(prev[:k])
			for _, b := range extra {
				p = append(p, int32(b))
			}
			if k < len(prev) && len(extra) == 0 {
				p = append(p, prev[k]+1) // parts exactly at k
			}
			c := testCall("ep", id, 2)
			c.Tokens = &Tokens{PromptIDs: p, CompletionIDs: []int32{5, 6}}
			return c
		}
		second := next("b", full, keep1)
		third := next("c", append(slices.Clone(second.Tokens.PromptIDs), 5, 6), keep2)
		calls := []*Call{first, second, third}
		s, _ := writeRebuilt(t, calls, 2)
		assertSameCalls(t, s.read(t), calls)
	})
}

// TestTokSeqShares: a sequence that continues all of another's blocks
// extends them in their spare capacity; a second continuation (a fork)
// copies instead, and neither changes what the other holds.
func TestTokSeqShares(t *testing.T) {
	full := ids(9, 2000)
	base := newTokSeq(&promptHashes{ids: full[:700]}, full[700:900], nil)
	base.blocks = slices.Grow(base.blocks, 64) // room to share in
	next := newTokSeq(&promptHashes{ids: full[:1500]}, full[1500:1600], base)
	fork := newTokSeq(&promptHashes{ids: append(slices.Clone(full[:1000]), 7, 7)}, ids(3, 900), base)
	if &next.blocks[0] != &base.blocks[0] || !base.lent {
		t.Errorf("the continuation does not share its base's blocks")
	}
	if &fork.blocks[0] == &base.blocks[0] {
		t.Errorf("the fork shares the blocks the continuation took")
	}
	for _, c := range []struct {
		s          *tokSeq
		prompt, cp []int32
	}{{next, full[:1500], full[1500:1600]}, {fork, append(slices.Clone(full[:1000]), 7, 7), ids(3, 900)}} {
		want := newTokSeq(&promptHashes{ids: c.prompt}, c.cp, nil)
		if !slices.Equal(c.s.blocks, want.blocks) || !slices.Equal(c.s.tail, want.tail) {
			t.Errorf("a sequence built on its base differs from one built alone")
		}
	}
	if got := newTokSeq(&promptHashes{ids: full[:1500]}, nil, base); &got.blocks[0] == &base.blocks[0] {
		t.Errorf("a second continuation shares the lent blocks")
	}
}

// TestEncoderLongEpisode: over a long agent episode the encoder's state
// grows with its context, not with the context times the calls it keeps:
// each call's message refs and token hashes extend the call's before it
// instead of copying them. The episode still reads back exactly.
func TestEncoderLongEpisode(t *testing.T) {
	calls := growingEpisode(120, 2000)
	var s storedEpisode
	e := NewEpisodeEncoder(true)
	for _, c := range calls {
		s.write(t, e, c)
	}
	assertSameCalls(t, s.read(t), calls)
	last := calls[len(calls)-1].Tokens
	idBytes := 4 * (len(last.PromptIDs) + len(last.CompletionIDs))
	if got := e.Bytes(); got > idBytes/4+32<<10 {
		t.Errorf("the encoder holds %d bytes for an episode whose last call has %d bytes of ids", got, idBytes)
	}
}
