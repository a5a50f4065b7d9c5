package recorder

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// storedEpisode is an in-memory backend for codec tests: packed units in
// storage order.
type storedEpisode struct{ units [][]byte }

func (s *storedEpisode) write(t testing.TB, e *EpisodeEncoder, c *Call) {
	t.Helper()
	d, blocks, err := e.Encode(c)
	if err != nil {
		t.Fatalf("Encode(%s): %v", c.CallID, err)
	}
	s.units = append(s.units, Pack(nil, d, blocks))
}

func (s *storedEpisode) size() (n int) {
	for _, u := range s.units {
		n += len(u)
	}
	return n
}

func (s *storedEpisode) read(t testing.TB) []*Call {
	t.Helper()
	blocks := map[BlockHash][]byte{}
	src := func(h BlockHash) ([]byte, bool) { b, ok := blocks[h]; return b, ok }
	dec := NewEpisodeDecoder()
	var out []*Call
	for _, u := range s.units {
		d, bs, err := Unpack(u)
		if err != nil {
			t.Fatalf("Unpack: %v", err)
		}
		for _, b := range bs {
			blocks[b.Hash] = b.Data
		}
		c, err := dec.Decode(d, src)
		if err != nil {
			t.Fatalf("Decode: %v", err)
		}
		out = append(out, c)
	}
	return out
}

func assertSameCalls(t *testing.T, got, want []*Call) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("decoded %d calls, want %d", len(got), len(want))
	}
	for i := range want {
		for _, f := range []struct {
			name      string
			got, want []byte
		}{{"request", got[i].Request, want[i].Request}, {"response", got[i].Response, want[i].Response}, {"usage", got[i].Usage, want[i].Usage}} {
			if !bytes.Equal(f.got, f.want) {
				t.Fatalf("call %s: %s differs:\n got %.200q\nwant %.200q", want[i].CallID, f.name, f.got, f.want)
			}
		}
		if !reflect.DeepEqual(got[i], want[i]) {
			g, _ := json.Marshal(got[i])
			w, _ := json.Marshal(want[i])
			t.Fatalf("call %s differs:\n got %.400s\nwant %.400s", want[i].CallID, g, w)
		}
	}
}

func TestCodecRoundTripFixtures(t *testing.T) {
	for name, calls := range fixtureEpisodes(t) {
		for _, dedup := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/dedup=%v", name, dedup), func(t *testing.T) {
				var s storedEpisode
				enc := NewEpisodeEncoder(dedup)
				for _, c := range calls {
					s.write(t, enc, c)
				}
				assertSameCalls(t, s.read(t), calls)
			})
		}
	}
}

// TestCodecDedupFixtures checks that a harness's resent history is stored
// once: the whole fixture episode packs to less than its last two requests.
func TestCodecDedupFixtures(t *testing.T) {
	for name, calls := range fixtureEpisodes(t) {
		if len(calls) < 3 {
			continue
		}
		var s storedEpisode
		enc := NewEpisodeEncoder(true)
		raw := 0
		for _, c := range calls {
			s.write(t, enc, c)
			raw += len(c.Request)
		}
		last2 := len(calls[len(calls)-1].Request) + len(calls[len(calls)-2].Request)
		if s.size() >= last2 {
			t.Errorf("%s: %d calls (%d raw bytes) packed to %d bytes, want < %d (last two requests)", name, len(calls), raw, s.size(), last2)
		}
	}
}

func TestCodecExactBodies(t *testing.T) {
	bodies := []string{
		`{"messages":[{"a":1},{"b":2}]}`,
		"{\n  \"messages\": [\n    {\"a\": 1},\n    {\"b\": 2}\n  ],\n  \"model\": \"x\"\n}\n",
		`{"messages":[{"a":1} ,{"b":2},  {"c":3}]}`, // uneven separators: one whole block
		`{"messages":[],"tools":[ ],"system":"short"}`,
		`{"system":"` + strings.Repeat("s", 100) + `","messages":[1,2,3],"messages":[4]}`,
		`{"input":"` + strings.Repeat("x", 80) + `","instructions":{"k":"` + strings.Repeat("y", 70) + `"}}`,
		`["not","an","object"]`,
		`"a json string"`,
		`{"messages":[{"a":1},`, // truncated
		`{"messages":[1,2,3]} trailing`,
		`  {"tools":[{"t":1}]}`,
		`{"messages":[{"x":"\u00e9\"]"},{"y":"]["}]}`,
	}
	for i, b := range bodies {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			c := testCall("ep", fmt.Sprint("c", i), i)
			c.Request = json.RawMessage(b)
			c.RequestRaw = !json.Valid(c.Request)
			var s storedEpisode
			enc := NewEpisodeEncoder(true)
			s.write(t, enc, c)
			c2 := testCall("ep", fmt.Sprint("d", i), i+1)
			c2.Request = c.Request
			s.write(t, enc, c2)
			assertSameCalls(t, s.read(t), []*Call{c, c2})
		})
	}
}

func TestCodecNilFields(t *testing.T) {
	c := &Call{CallID: "bare", EpisodeID: "ep"}
	t2 := testCall("ep", "toks-empty", 2)
	t2.Tokens.PromptIDs = []int32{}
	t3 := testCall("ep", "no-prompt", 3)
	t3.Tokens.PromptIDs = nil
	want := []*Call{c, t2, t3}
	var s storedEpisode
	enc := NewEpisodeEncoder(true)
	for _, c := range want {
		s.write(t, enc, c)
	}
	assertSameCalls(t, s.read(t), want)
}

// observed returns a dedup encoder that observed the stored units, as a
// store rebuilds one after a restart.
func observed(t *testing.T, units [][]byte) *EpisodeEncoder {
	t.Helper()
	enc := NewEpisodeEncoder(true)
	for _, u := range units {
		d, _, err := Unpack(u)
		if err != nil {
			t.Fatal(err)
		}
		if err := enc.Observe(d); err != nil {
			t.Fatalf("Observe: %v", err)
		}
	}
	return enc
}

// writeRebuilt stores calls, rebuilding the encoder from the stored
// documents (Observe) after the first split of them, as a backend does
// after a restart; it returns the stored units and the rebuilt encoder.
func writeRebuilt(t *testing.T, calls []*Call, split int) (storedEpisode, *EpisodeEncoder) {
	t.Helper()
	var s storedEpisode
	enc := NewEpisodeEncoder(true)
	for _, c := range calls[:split] {
		s.write(t, enc, c)
	}
	enc = observed(t, s.units)
	for _, c := range calls[split:] {
		s.write(t, enc, c)
	}
	return s, enc
}

// TestCodecObserve rebuilds an encoder from stored documents halfway
// through an episode and checks it still deduplicates and decodes.
// The vLLM episode's responses carry prompt ids (version 2 prompt-ids
// fields in the observed documents).
func TestCodecObserve(t *testing.T) {
	for name, calls := range map[string][]*Call{"growing": growingEpisode(40, 2000), "vllm": vllmEpisode(12)} {
		t.Run(name, func(t *testing.T) {
			s, _ := writeRebuilt(t, calls, len(calls)/2)
			assertSameCalls(t, s.read(t), calls)
			var cont storedEpisode
			enc := NewEpisodeEncoder(true)
			for _, c := range calls {
				cont.write(t, enc, c)
			}
			if s.size() != cont.size() {
				t.Errorf("rebuilt encoder stored %d bytes, continuous encoder %d", s.size(), cont.size())
			}
		})
	}
}

func TestUnmarshalCallRejectsGarbage(t *testing.T) {
	b, err := MarshalCall(testCall("ep", "x", 1))
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range [][]byte{nil, []byte("garbage"), b[:len(b)/2], append(b[:len(b):len(b)], 0)} {
		if _, err := UnmarshalCall(in); !errors.Is(err, ErrCorrupt) {
			t.Errorf("UnmarshalCall(%.20q) error = %v, want ErrCorrupt", in, err)
		}
	}
}

// TestPackHighlyCompressible checks that a body compressing far beyond the
// initial decode buffer still unpacks (the buffer grows while data decodes).
func TestPackHighlyCompressible(t *testing.T) {
	c := testCall("ep", "big", 1)
	c.Request = json.RawMessage(`"` + strings.Repeat("a", 8<<20) + `"`)
	b, err := MarshalCall(c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := UnmarshalCall(b)
	if err != nil || !bytes.Equal(got.Request, c.Request) {
		t.Fatalf("UnmarshalCall of %d packed bytes: %v", len(b), err)
	}
}

// TestCodecTokensInterleaved interleaves three threads (a main loop and two
// subagents) whose prompts each continue their own thread's previous call:
// with token ids kept only for the last calls, a call whose base is older
// stores its whole prompt, and every call must still decode exactly, also
// after the encoder is rebuilt from storage midway.
func TestCodecTokensInterleaved(t *testing.T) {
	calls := interleave(growingEpisode(12, 800), growingEpisode(12, 600), growingEpisode(12, 700))
	s, enc := writeRebuilt(t, calls, 18)
	assertSameCalls(t, s.read(t), calls)
	recent := enc.hist.order[len(enc.hist.order)-tokenWindow:]
	for id, r := range enc.hist.byID {
		if r.toks != nil {
			t.Errorf("call %s still holds %d token ids after the encoder encoded", id, len(r.toks))
		}
		if (r.seq != nil || r.meta != nil) && !slices.Contains(recent, id) {
			t.Errorf("call %s still holds a token sequence or metadata", id)
		}
	}
	// Each call continues its thread's call three calls back: it stores
	// only its new ids, before the rebuild and after.
	for i, u := range s.units[3:] {
		doc := storedDoc(t, u)
		prev := calls[i].Tokens
		if want := len(prev.PromptIDs) + len(prev.CompletionIDs); doc.tokPrefix != want {
			t.Errorf("%s: token prefix %d, want %d", calls[i+3].CallID, doc.tokPrefix, want)
		}
	}
}

// TestCodecTokensForks has several calls continue one base call (retries,
// forks): the first appends in the base's spare capacity (extendToks), the
// others must not write over it.
func TestCodecTokensForks(t *testing.T) {
	base := testCall("ep", "base", 1)
	base.Tokens = &Tokens{PromptIDs: make([]int32, 0, 64), CompletionIDs: []int32{9, 9}}
	base.Tokens.PromptIDs = append(base.Tokens.PromptIDs, 1, 2, 3)
	calls := []*Call{base}
	for i := range 4 {
		c := testCall("ep", fmt.Sprintf("fork-%d", i), 2+i)
		c.Tokens = &Tokens{PromptIDs: []int32{1, 2, 3, 9, 9, int32(100 + i), int32(200 + i)}, CompletionIDs: []int32{int32(300 + i)}}
		calls = append(calls, c)
	}
	next := testCall("ep", "next", 9)
	next.Tokens = &Tokens{PromptIDs: []int32{1, 2, 3, 9, 9, 100, 200, 300, 7}, CompletionIDs: []int32{8}}
	calls = append(calls, next)
	var s storedEpisode
	e := NewEpisodeEncoder(true)
	for _, c := range calls {
		s.write(t, e, c)
	}
	assertSameCalls(t, s.read(t), calls)
	dec, blocks := NewEpisodeDecoder(), map[BlockHash][]byte{}
	for _, u := range s.units {
		d, bs, _ := Unpack(u)
		for _, b := range bs {
			blocks[b.Hash] = b.Data
		}
		if _, err := dec.Decode(d, func(h BlockHash) ([]byte, bool) { b, ok := blocks[h]; return b, ok }); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range calls {
		r := dec.hist.byID[c.CallID]
		if want := append(slices.Clone(c.Tokens.PromptIDs), c.Tokens.CompletionIDs...); !slices.Equal(r.toks, want) {
			t.Errorf("call %d: decoder keeps %v, want %v", i, r.toks, want)
		}
	}
}

// TestCodecOldBase interleaves six threads, so that each call's best base
// is six calls back, past the calls whose metadata and token sequences the
// encoder keeps: such a call stores its metadata whole and its prompt ids
// whole, and still reads back exactly.
func TestCodecOldBase(t *testing.T) {
	threads := make([][]*Call, 6)
	for th := range threads {
		threads[th] = growingEpisode(5, 500+100*th)
	}
	calls := interleave(threads...)
	var s storedEpisode
	enc := NewEpisodeEncoder(true)
	for _, c := range calls {
		s.write(t, enc, c)
	}
	assertSameCalls(t, s.read(t), calls)
	whole := 0
	for _, u := range s.units[6:] {
		if doc := storedDoc(t, u); doc.base != "" && !doc.metaDelta && doc.tokPrefix == 0 {
			whole++
		}
	}
	if whole == 0 {
		t.Error("no call was stored against a base past the token window")
	}
}

// storedDoc parses the call document of a stored unit.
func storedDoc(t *testing.T, unit []byte) doc {
	t.Helper()
	d, _, err := Unpack(unit)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := parseDoc(d)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// TestArrayRefsDuplicateKey: of a key that comes twice in a body, the refs
// later calls delta against are the last field's, as they were when they
// were kept in a map: records written then read the same now.
func TestArrayRefsDuplicateKey(t *testing.T) {
	a, b := []BlockHash{{1}}, []BlockHash{{2}, {3}}
	fr := arrayRefs([]field{{key: "messages", refs: a}, {key: "tools", whole: true}, {key: "messages", refs: b}})
	if len(fr) != 1 || !slices.Equal(fr.get("messages"), b) || fr.get("tools") != nil {
		t.Fatalf("arrayRefs = %+v, want messages' last refs only", fr)
	}
}

// TestEncoderCompact compacts an encoder mid-episode, as a store does with
// an idle episode: it keeps only the latest call, holds far less, and the
// next call still stores only what it adds to it; a thread resuming from
// before the latest call stores its prompt ids whole, and every call reads
// back exactly.
func TestEncoderCompact(t *testing.T) {
	calls := growingEpisode(12, 2000)
	var s storedEpisode
	enc := NewEpisodeEncoder(true)
	for _, c := range calls[:8] {
		s.write(t, enc, c)
	}
	before := enc.Bytes()
	if !enc.Compact() {
		t.Fatal("Compact of an encoder with 8 calls let go of nothing")
	}
	if enc.Compact() {
		t.Error("a second Compact let go of something")
	}
	if got := enc.hist.order; !slices.Equal(got, []string{calls[7].CallID}) || len(enc.hist.byID) != 1 {
		t.Fatalf("compacted encoder remembers %v (%d by id), want only %s", got, len(enc.hist.byID), calls[7].CallID)
	}
	if after := enc.Bytes(); after > before/2 {
		t.Errorf("compacted encoder holds %d bytes, %d before", after, before)
	}
	for _, c := range calls[8:] {
		s.write(t, enc, c)
	}
	assertSameCalls(t, s.read(t), calls)
	doc := storedDoc(t, s.units[8])
	prev := calls[7].Tokens
	if want := len(prev.PromptIDs) + len(prev.CompletionIDs); doc.base != calls[7].CallID || doc.tokPrefix != want || !doc.metaDelta {
		t.Errorf("first call after Compact: base %q, token prefix %d, metadata delta %v; want base %s, prefix %d, delta",
			doc.base, doc.tokPrefix, doc.metaDelta, calls[7].CallID, want)
	}

	// Two threads: after Compact, the thread that did not write last
	// resumes against a call it no longer has.
	mixed := interleave(growingEpisode(4, 900), growingEpisode(4, 700))
	s, enc = storedEpisode{}, NewEpisodeEncoder(true)
	for i, c := range mixed {
		if i == 6 {
			enc.Compact()
		}
		s.write(t, enc, c)
	}
	assertSameCalls(t, s.read(t), mixed)
	// Its own last call (mixed[4]) is gone: it deltas against thread 1's,
	// sharing at most their common start.
	own := mixed[4].Tokens
	if doc := storedDoc(t, s.units[6]); doc.base != mixed[5].CallID || doc.tokPrefix >= len(own.PromptIDs) {
		t.Errorf("thread 0 after Compact: base %q, token prefix %d; want base %s and far less than its own last call's %d ids",
			doc.base, doc.tokPrefix, mixed[5].CallID, len(own.PromptIDs))
	}
}

// interleave returns the calls of threads (of one length) turn by turn, as
// one episode's: call-TT-H is thread H's turn TT.
func interleave(threads ...[]*Call) []*Call {
	var calls []*Call
	for i := range threads[0] {
		for th := range threads {
			c := *threads[th][i]
			c.CallID = fmt.Sprintf("call-%02d-%d", i, th)
			calls = append(calls, &c)
		}
	}
	return calls
}

// TestEncoderBytesAllocs: sizing an encoder, which the stores do for each
// episode a write touches, allocates nothing.
func TestEncoderBytesAllocs(t *testing.T) {
	var s storedEpisode
	enc := NewEpisodeEncoder(true)
	for _, c := range growingEpisode(6, 500) {
		s.write(t, enc, c)
	}
	if allocs := testing.AllocsPerRun(50, func() { _ = enc.Bytes() }); allocs > 0 {
		t.Errorf("Bytes of a 6-call encoder allocated %.1f times", allocs)
	}
}
