package recorder

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// TestParseOwnMeta holds parseOwnMeta to parseMeta.
func TestParseOwnMeta(t *testing.T) {
	var metas [][]byte
	for _, calls := range [][]*Call{vllmEpisode(3), growingEpisode(3, 100)} {
		for _, c := range calls {
			m, err := marshalMeta(c)
			if err != nil {
				t.Fatal(err)
			}
			metas = append(metas, m)
		}
	}
	for _, s := range []string{`{}`, ` { } `, `{"a":1,"b":"x\"y","c":[1,{"d":"}"}],"e":null}`, `{"a":1,"a":2}`,
		`{"a\u0062":1}`, `{"a":1 "b":2}`, `{"a":1}x`, `[1]`, `{"a":}`, `{"a":1,}`} {
		metas = append(metas, []byte(s))
	}
	for _, meta := range metas {
		got, gerr := parseOwnMeta(meta)
		want, werr := parseMeta(meta)
		if (gerr == nil) != (werr == nil) || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: parseOwnMeta %v %v, parseMeta %v %v", meta, got, gerr, want, werr)
		}
	}
}

// TestEncoderKeepsNoTokens: a call's metadata holds no token ids or
// logprobs (the document does), so what an encoder keeps of it to delta
// later calls against is small; it shares no memory with the marshalled
// metadata, and shares the members equal to the previous call's with it
// (the tokens member among them); and calls whose token values are equal
// still decode to exactly what was encoded.
func TestEncoderKeepsNoTokens(t *testing.T) {
	calls := vllmEpisode(4)
	for _, c := range calls[1:] {
		c.Tokens.CompletionIDs = slices.Clone(calls[0].Tokens.CompletionIDs)
		c.Tokens.Logprobs = slices.Clone(calls[0].Tokens.Logprobs)
	}
	var s storedEpisode
	enc := NewEpisodeEncoder(true)
	for _, c := range calls {
		s.write(t, enc, c)
	}
	assertSameCalls(t, s.read(t), calls)
	const placeholder = `{"prompt_ids":null,"completion_ids":null}`
	for _, c := range calls {
		if v, ok := enc.hist.byID[c.CallID].meta.get("tokens"); !ok || v != placeholder {
			t.Fatalf("the encoder keeps call %s's tokens as %.60q, want %s", c.CallID, v, placeholder)
		}
	}

	var prev metaMap
	for i, c := range calls[:2] {
		meta, full, err := marshalMetaMap(nil, c, true)
		if err != nil {
			t.Fatal(err)
		}
		kept := full.kept(prev)
		if !reflect.DeepEqual(kept, full) {
			t.Fatalf("kept %v, want %v", kept, full)
		}
		lo, hi := uintptr(unsafe.Pointer(&meta[0])), uintptr(unsafe.Pointer(&meta[len(meta)-1]))
		shared := 0
		for _, kv := range kept {
			for _, s := range []string{kv.k, kv.v} {
				if p := uintptr(unsafe.Pointer(unsafe.StringData(s))); len(s) > 0 && p >= lo && p <= hi {
					t.Errorf("kept %q aliases the marshalled metadata", s)
				}
			}
			if pv, ok := prev.get(kv.k); ok && pv == kv.v {
				if unsafe.StringData(pv) != unsafe.StringData(kv.v) {
					t.Errorf("call %d keeps its own copy of %s, equal to the call before's", i, kv.k)
				}
				shared++
			}
		}
		if i == 1 && shared < len(kept)/2 {
			t.Errorf("call 1 shares %d of %d members with call 0", shared, len(kept))
		}
		prev = kept
	}
}

// TestMetaMapOps holds diff, patch and the sorted form to what a Go map of
// the same members does, repeated keys included.
func TestMetaMapOps(t *testing.T) {
	kvs := func(s string) []metaKV {
		var out []metaKV
		for _, f := range strings.Fields(s) {
			k, v, _ := strings.Cut(f, "=")
			out = append(out, metaKV{k, v})
		}
		return out
	}
	asMap := func(kvs []metaKV) map[string]string {
		m := map[string]string{}
		for _, kv := range kvs {
			m[kv.k] = kv.v
		}
		return m
	}
	sorted := func(m map[string]string) metaMap {
		var out metaMap
		for _, k := range slices.Sorted(maps.Keys(m)) {
			out = append(out, metaKV{k, m[k]})
		}
		return out
	}
	cases := []struct{ base, m string }{
		{"", ""}, {"a=1", ""}, {"", "a=1"}, {"a=1 b=2 c=3", "a=1 b=9 d=4"},
		{"b=2 a=1", "c=3 a=2 a=5"}, {"x=1 y=2", "x=1 y=2"}, {"a=1 c=3", "b=2 d=4"},
	}
	for _, tc := range cases {
		base, m := newMetaMap(kvs(tc.base)), newMetaMap(kvs(tc.m))
		if want := sorted(asMap(kvs(tc.m))); !reflect.DeepEqual(m, want) && len(m)+len(want) > 0 {
			t.Errorf("%q sorted %v, want %v", tc.m, m, want)
		}
		set, del := m.diff(base)
		if got := base.patch(set, del); !reflect.DeepEqual(asMap(got), asMap(m)) || !slices.IsSortedFunc(got, func(a, b metaKV) int { return strings.Compare(a.k, b.k) }) {
			t.Errorf("%q against %q: set %v del %v patch to %v", tc.m, tc.base, set, del, got)
		}
		for _, kv := range set {
			if bv, ok := base.get(kv[0]); ok && bv == kv[1] {
				t.Errorf("%q against %q sets %s, unchanged", tc.m, tc.base, kv[0])
			}
		}
		if !slices.IsSortedFunc(set, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) }) || !slices.IsSorted(del) {
			t.Errorf("%q against %q: set %v or del %v unsorted", tc.m, tc.base, set, del)
		}
	}
	// A document may set a key twice and delete one it sets: in order,
	// the last set wins and deletions come after.
	got := newMetaMap(kvs("a=1 b=2")).patch([][2]string{{"c", "3"}, {"a", "7"}, {"c", "4"}}, []string{"b", "z"})
	if want := newMetaMap(kvs("a=7 c=4")); !reflect.DeepEqual(got, want) {
		t.Errorf("patch %v, want %v", got, want)
	}
}

// TestEncoderMetaSurvivesReuse: Encode marshals a call's metadata into a
// recycled buffer and hands the buffer back; what an encoder keeps of the
// metadata must not change when other encoders write theirs over it.
func TestEncoderMetaSurvivesReuse(t *testing.T) {
	enc := NewEpisodeEncoder(true)
	for _, c := range vllmEpisode(3) {
		if _, _, err := enc.Encode(c); err != nil {
			t.Fatal(err)
		}
	}
	snap := map[string]metaMap{}
	for id, r := range enc.hist.byID {
		m := make(metaMap, len(r.meta))
		for i, kv := range r.meta {
			m[i] = metaKV{strings.Clone(kv.k), strings.Clone(kv.v)}
		}
		snap[id] = m
	}
	other := NewEpisodeEncoder(true)
	for i, c := range vllmEpisode(12) {
		cc := *c
		cc.EpisodeID, cc.Model, cc.Harness = "another-episode", strings.Repeat("x", i+20), strings.Repeat("y", 40-i)
		if _, _, err := other.Encode(&cc); err != nil {
			t.Fatal(err)
		}
	}
	for id, r := range enc.hist.byID {
		if !reflect.DeepEqual(r.meta, snap[id]) {
			t.Errorf("call %s: the encoder's metadata changed when another encoder ran:\n got %v\nwant %v", id, r.meta, snap[id])
		}
	}
}
