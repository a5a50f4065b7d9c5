package recorder

import (
	"reflect"
	"slices"
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

// TestEncoderKeepsNoTokens: what an encoder keeps of a call's metadata to
// delta later calls against holds its token value as "" (kilobytes per call
// otherwise) and shares no memory with the marshalled metadata, and calls
// whose token values are equal, which the kept base no longer shows, still
// decode to exactly what was encoded.
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
	for _, c := range calls {
		if v, ok := enc.hist.byID[c.CallID].meta[metaTokens]; !ok || v != "" {
			t.Fatalf("the encoder keeps call %s's tokens as %.40q, want \"\"", c.CallID, v)
		}
	}

	meta, err := marshalMeta(calls[0])
	if err != nil {
		t.Fatal(err)
	}
	full, err := parseOwnMeta(meta)
	if err != nil || full[metaTokens] == "" {
		t.Fatalf("parsed metadata %v without tokens: %v", full, err)
	}
	kept := full.kept()
	if len(kept) != len(full) || kept[metaTokens] != "" {
		t.Fatalf("kept %d keys, tokens %.40q; want %d keys, tokens \"\"", len(kept), kept[metaTokens], len(full))
	}
	lo, hi := uintptr(unsafe.Pointer(&meta[0])), uintptr(unsafe.Pointer(&meta[len(meta)-1]))
	for k, v := range kept {
		if k != metaTokens && v != full[k] {
			t.Errorf("kept %s = %s, want %s", k, v, full[k])
		}
		for _, s := range []string{k, v} {
			if p := uintptr(unsafe.Pointer(unsafe.StringData(s))); len(s) > 0 && p >= lo && p <= hi {
				t.Errorf("kept %q aliases the marshalled metadata", s)
			}
		}
	}
}
