package recorder

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/tidwall/gjson"
)

// FuzzDecode feeds garbage to the document and pack decoders: they must
// return an error, never panic or allocate without bound.
func FuzzDecode(f *testing.F) {
	enc := NewEpisodeEncoder(true)
	for _, c := range growingEpisode(3, 300) {
		d, blocks, err := enc.Encode(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(d)
		f.Add(Pack(nil, d, blocks))
	}
	for _, c := range vllmEpisode(2) {
		d, blocks, err := enc.Encode(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(Pack(nil, d, blocks))
	}
	for _, v := range []byte{docVersion1, docVersion} {
		f.Add([]byte{v, 0, 0, 0, 0, 0, 0, 0, 0})
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		none := func(BlockHash) ([]byte, bool) { return []byte(`{}`), true }
		NewEpisodeDecoder().Decode(b, none)
		NewEpisodeEncoder(true).Observe(b)
		if d, _, err := Unpack(b); err == nil {
			NewEpisodeDecoder().Decode(d, none)
		}
		UnmarshalCall(b)
	})
}

// FuzzBodyRoundTrip checks that any request body, JSON or not, comes back
// byte for byte after a dedup encode and decode.
func FuzzBodyRoundTrip(f *testing.F) {
	f.Add([]byte(`{"messages":[{"a":1}, {"b":2}],"tools":[1,2],"system":"` + string(bytes.Repeat([]byte("x"), 70)) + `"}`))
	f.Add([]byte(`{"input":[ 1 ,2 ]}`))
	f.Add([]byte(`not json`))
	f.Add([]byte(`{"prompt_token_ids":[1,2,3],"choices":[{"a":1}]}`)) // testCall's prompt ids: stored once
	f.Add([]byte(`{"prompt_token_ids":[1,2,3 ]}`))
	f.Add([]byte(`{"sglext":{"input_ids":[1,2,3],"output_ids":[[4]]},"sglext":{"input_ids":[1,2,3]}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var s storedEpisode
		enc := NewEpisodeEncoder(true)
		c1 := testCall("ep", "1", 1)
		c1.Request, c1.Response = json.RawMessage(body), json.RawMessage(body)
		c2 := testCall("ep", "2", 2)
		c2.Request = json.RawMessage(append(append([]byte{}, body...), ' '))
		s.write(t, enc, c1)
		s.write(t, enc, c2)
		got := s.read(t)
		if !bytes.Equal(got[0].Request, body) || !bytes.Equal(got[0].Response, body) || !bytes.Equal(got[1].Request, c2.Request) {
			t.Fatalf("body %q did not round-trip", body)
		}
		b, err := MarshalCall(c1)
		if err != nil {
			t.Fatal(err)
		}
		if c, err := UnmarshalCall(b); err != nil || !bytes.Equal(c.Response, body) {
			t.Fatalf("body %q did not round-trip self-contained: %v", body, err)
		}
	})
}

// FuzzRebuilds holds rebuilds (the allocation-free check cutArray uses) to
// joinArray's answer, on arrays as cut and on altered spans.
func FuzzRebuilds(f *testing.F) {
	f.Add([]byte(`[1, 2,  3]`), uint8(3))
	f.Add([]byte(` [ {"a":[1,2]} ,"x" ] `), uint8(0))
	f.Fuzz(func(t *testing.T, span []byte, cut uint8) {
		v := gjson.ParseBytes(span)
		if !v.IsArray() {
			return
		}
		span = span[v.Index : v.Index+len(v.Raw)]
		fl, ok := cutArray(span, gjson.ParseBytes(span))
		if !ok {
			return
		}
		for _, s := range [][]byte{span, span[:int(cut)%len(span)], append(bytes.Clone(span), ' '), append([]byte{' '}, span...)} {
			if got, want := rebuilds(fl, s), bytes.Equal(joinArray(nil, fl, fl.data), s); got != want {
				t.Fatalf("rebuilds(%q) = %v, joinArray says %v", s, got, want)
			}
		}
	})
}
