package recorder

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"testing"
)

// readUnits reads a frozen episode fixture: packed units, each after its
// uvarint length. testdata/v1/episode.bin was written by the version 1
// encoder (four deduplicated calls of a vLLM episode, then the first call
// again as a self-contained spill unit), testdata/v2/episode.bin by the
// version 2 encoder (those calls again, an n=2 call with per-choice ids and
// logprobs and a mismatch, a call with empty ids, then the n=2 call as a
// spill unit). No flag rewrites them.
func readUnits(t *testing.T, name string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var units [][]byte
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			t.Fatalf("%s: bad unit length", name)
		}
		units, b = append(units, b[k:k+int(n)]), b[k+int(n):]
	}
	return units
}

// TestDecodeVersion2 proves that records stored before version 3, with
// their completion ids and logprobs in the metadata, read back and export
// byte for byte as they did (the golden was written by the version 2
// decoder).
func TestDecodeVersion2(t *testing.T) {
	calls := readFrozen(t, docVersion2)
	// Re-encoded by this version, they decode to the same calls, and the
	// metadata holds none of their ids or logprobs.
	again := reencoded(t, calls)
	for i, u := range again.units {
		d, _, _ := Unpack(u)
		if d[0] != docVersion || bytes.Contains(d, []byte(`"logprobs":[`)) || bytes.Contains(d, []byte(`"completion_ids":[`)) {
			t.Errorf("unit %d: version %d, or ids or logprobs in its metadata", i, d[0])
		}
	}
}

// TestCompletionSectionChecked: a version 3 document whose completion ids
// and metadata disagree (tokens on one side only, or another count of
// choices) is corrupt, not decoded with ids missing.
func TestCompletionSectionChecked(t *testing.T) {
	withChoices := testCall("ep", "c1", 1)
	withChoices.Tokens.Choices = []ChoiceTokens{{Index: 0, CompletionIDs: []int32{1}}, {Index: 1, CompletionIDs: []int32{2}}}
	noTokens := testCall("ep", "c1", 1)
	noTokens.Tokens = nil
	oneChoice := &Tokens{CompletionIDs: []int32{1}, Choices: []ChoiceTokens{{CompletionIDs: []int32{1}}}}
	for name, tt := range map[string]struct {
		c    *Call
		comp *Tokens
	}{
		"ids without tokens":      {noTokens, oneChoice},
		"tokens without ids":      {withChoices, nil},
		"fewer choices than meta": {withChoices, oneChoice},
	} {
		meta, err := marshalMeta(tt.c)
		if err != nil {
			t.Fatal(err)
		}
		d := doc{callID: "c1", meta: meta, comp: tt.comp}
		_, err = NewEpisodeDecoder().Decode(d.appendTo(nil), func(BlockHash) ([]byte, bool) { return nil, false })
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Decode = %v, want ErrCorrupt", name, err)
		}
	}
}

// TestDecodeVersion1 proves that records stored before version 2 read back
// and export byte for byte as they did (the golden was written by the
// version 1 decoder).
func TestDecodeVersion1(t *testing.T) {
	readFrozen(t, 1)
}

// readFrozen reads testdata/vN: its calls decode, and with the spill unit
// export byte for byte as the golden (written by the version N decoder)
// says, and every unit is of version N. It returns the deduplicated calls.
func readFrozen(t *testing.T, version byte) []*Call {
	t.Helper()
	dir := fmt.Sprintf("testdata/v%d/", version)
	units := readUnits(t, dir+"episode.bin")
	want, err := os.ReadFile(dir + "episode.golden.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	s := storedEpisode{units: units[:len(units)-1]}
	calls := s.read(t)
	spill, err := UnmarshalCall(units[len(units)-1])
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	for _, c := range append(calls, spill) {
		b, _ := json.Marshal(c)
		got = append(append(got, b...), '\n')
	}
	if !bytes.Equal(got, want) {
		t.Errorf("version %d records export as\n%s\nwant\n%s", version, got, want)
	}
	for i, u := range units {
		if d, _, err := Unpack(u); err != nil || d[0] != version {
			t.Fatalf("unit %d: version %d (%v), want a version %d fixture", i, d[0], err, version)
		}
	}
	return calls
}

// reencoded stores calls with a fresh dedup encoder of this version and
// checks that they decode to the same calls.
func reencoded(t *testing.T, calls []*Call) storedEpisode {
	t.Helper()
	var s storedEpisode
	e := NewEpisodeEncoder(true)
	for _, c := range calls {
		s.write(t, e, c)
	}
	assertSameCalls(t, s.read(t), calls)
	return s
}

// TestVersion2RoundTrip re-encodes the version 1 episode: it decodes to the
// same calls, and the response's prompt_token_ids is stored once, in the
// token delta, when it is spelled compactly (call 3 spells it otherwise,
// and call 4 has no token ids: both keep it in their skeleton).
func TestVersion2RoundTrip(t *testing.T) {
	old := storedEpisode{units: readUnits(t, "testdata/v1/episode.bin")}
	old.units = old.units[:len(old.units)-1]
	calls := old.read(t)
	s := reencoded(t, calls)
	for i, u := range s.units {
		d, _, _ := Unpack(u)
		if d[0] != docVersion {
			t.Errorf("unit %d: version %d, want %d", i, d[0], docVersion)
		}
		inSkeleton := bytes.Contains(d, []byte(`"prompt_token_ids":[`))
		if want := i >= 2; inSkeleton != want {
			t.Errorf("call %d: prompt_token_ids in the skeleton = %v, want %v", i+1, inSkeleton, want)
		}
	}
	for _, c := range calls {
		b, err := MarshalCall(c)
		if err != nil {
			t.Fatal(err)
		}
		got, err := UnmarshalCall(b)
		if err != nil {
			t.Fatal(err)
		}
		assertSameCalls(t, []*Call{got}, []*Call{c})
	}
}

// TestPromptIDsFields checks which spellings of a response's prompt ids a
// version 2 document stores as a hole, and that every body comes back
// byte for byte, with and without dedup. testCall's prompt ids are 1,2,3.
func TestPromptIDsFields(t *testing.T) {
	tests := []struct {
		name, body, ids string
		hole            bool
	}{
		{"vllm", `{"id":"a","prompt_token_ids":[1,2,3],"choices":[]}`, "[1,2,3]", true},
		{"sglang", `{"id":"a","sglext":{"output_ids":[[4]], "input_ids":[1,2,3] },"x":1}`, "[1,2,3]", true},
		{"spaced", `{"id":"a","prompt_token_ids":[1, 2, 3]}`, "[1, 2, 3]", false},
		{"other ids", `{"id":"a","prompt_token_ids":[1,2,4]}`, "[1,2,4]", false},
		{"nested elsewhere", `{"id":"a","x":{"prompt_token_ids":[1,2,3]}}`, "[1,2,3]", false},
		{"sglext not an object", `{"id":"a","sglext":[1,2,3]}`, "[1,2,3]", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testCall("ep", "c1", 1)
			c.Response = json.RawMessage(tt.body)
			var s storedEpisode
			s.write(t, NewEpisodeEncoder(true), c)
			d, _, _ := Unpack(s.units[0])
			if hole := !bytes.Contains(d, []byte(tt.ids)); hole != tt.hole {
				t.Errorf("stored as a hole = %v, want %v", hole, tt.hole)
			}
			assertSameCalls(t, s.read(t), []*Call{c})
			b, err := MarshalCall(c)
			if err != nil {
				t.Fatal(err)
			}
			got, err := UnmarshalCall(b)
			if err != nil {
				t.Fatal(err)
			}
			assertSameCalls(t, []*Call{got}, []*Call{c})
		})
	}
}

// TestUpgradeFromVersion2: a proxy of this version goes on with an episode
// that one of version 2 stored: its encoder observes the version 2
// documents, its new calls dedup against them (their metadata deltas
// against a version 2 base, whose tokens hold ids), and one decoder reads
// the episode back, both versions in order.
func TestUpgradeFromVersion2(t *testing.T) {
	units := readUnits(t, "testdata/v2/episode.bin")
	s := storedEpisode{units: units[:len(units)-1]}
	old := s.read(t)
	enc := observed(t, s.units)
	// The next calls continue the episode: a turn with ids and logprobs,
	// the n=2 call again, and one without tokens after calls with them.
	var next []*Call
	for i, src := range []*Call{old[2], old[4], old[3]} {
		c := *src
		c.CallID, c.Seq = fmt.Sprintf("v3-%03d", i+7), int64(i+7)
		next = append(next, &c)
	}
	for _, c := range next {
		s.write(t, enc, c)
	}
	assertSameCalls(t, s.read(t), append(old, next...))
	for i, u := range s.units[len(old):] {
		if d := storedDoc(t, u); d.version != docVersion || d.base == "" || !d.metaDelta {
			t.Errorf("new call %d: version %d, base %q, metadata delta %v; want this version, deltas against an earlier call", i, d.version, d.base, d.metaDelta)
		}
	}
}
