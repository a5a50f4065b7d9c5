package recorder

import (
	"bytes"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestMetaWriterFields fails when a struct the metadata writer walks gains,
// loses or renames a JSON field: the writer must then learn it, or it would
// drop the field from every record.
func TestMetaWriterFields(t *testing.T) {
	want := map[reflect.Type]string{
		reflect.TypeFor[Call](): "schema episode_id seq call_id api method path model,omitempty stream started_at " +
			"first_byte_at,omitempty ended_at status end_reason error,omitempty request,omitempty " +
			"request_raw,omitempty request_encoding,omitempty response,omitempty response_encoding,omitempty " +
			"usage,omitempty upstream upstream_kind,omitempty injected,omitempty harness,omitempty " +
			"tokens,omitempty lineage,omitempty -",
		reflect.TypeFor[Tokens]():       "prompt_ids completion_ids logprobs,omitempty choices,omitempty mismatch,omitempty",
		reflect.TypeFor[ChoiceTokens](): "index completion_ids logprobs,omitempty",
		reflect.TypeFor[Lineage](): "parent_call_id,omitempty kind common_prefix_tokens,omitempty " +
			"common_prefix_messages,omitempty thread",
	}
	for typ, tags := range want {
		var got []string
		for f := range typ.Fields() {
			if f.IsExported() {
				got = append(got, f.Tag.Get("json"))
			}
		}
		if g := strings.Join(got, " "); g != tags {
			t.Errorf("%s's JSON fields are\n%s\nthe metadata writer knows\n%s", typ, g, tags)
		}
	}
}

// metaCases are calls the writer must encode as encoding/json does, or give
// up on.
func metaCases() []*Call {
	at := time.Date(2026, 12, 6, 1, 2, 3, 456789000, time.UTC)
	full := &Call{Schema: CallSchema, EpisodeID: "ep-1", Seq: 7, CallID: "c-7", API: APIChatCompletions, Method: "POST",
		Path: "/v1/chat/completions", Model: "Qwen/Qwen3-8B", Stream: true, StartedAt: at, FirstByteAt: &at,
		EndedAt: at.Add(time.Second), Status: 200, EndReason: EndDone, Error: "upstream said no",
		Request: []byte(`{"a":1}`), RequestRaw: true, RequestEncoding: "base64", Response: []byte(`{}`),
		ResponseEncoding: "base64", Usage: []byte(`{"prompt_tokens":3}`), Upstream: "http://127.0.0.1:8000",
		UpstreamKind: "vllm", Injected: []string{"return_token_ids", "logprobs"}, Harness: "codex",
		Tokens: &Tokens{PromptIDs: []int32{1, 2}, CompletionIDs: []int32{3, -4}, Logprobs: []float32{-0.5, 0,
			float32(math.Copysign(0, -1)), -1e-7, 3e21, -123456.79, 1e-6, 9.99e20},
			Choices:  []ChoiceTokens{{Index: 1, CompletionIDs: []int32{}, Logprobs: []float32{-2}}, {Index: 2}},
			Mismatch: "3 ids, 2 deltas"},
		Lineage: &Lineage{ParentCallID: "c-6", Kind: LineageExtend, CommonPrefixTokens: 2, CommonPrefixMsgs: 1, Thread: 3},
	}
	cases := []*Call{full, {}, {Tokens: &Tokens{}, Lineage: &Lineage{}}, {Tokens: &Tokens{CompletionIDs: []int32{}}}}
	for _, mutate := range []func(c *Call){
		func(c *Call) { c.Error = `a "quoted" error` },
		func(c *Call) { c.Error = "café" },
		func(c *Call) { c.Model = "a<b>&c" },
		func(c *Call) { c.Harness = "tab\there" },
		func(c *Call) { c.Injected = []string{"ok", "\u2028"} },
		func(c *Call) { c.Tokens.Logprobs[0] = float32(math.NaN()) },
		func(c *Call) { c.Tokens.Choices[0].Logprobs[0] = float32(math.Inf(-1)) },
		func(c *Call) { c.EndedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) },
		func(c *Call) { t := at.In(time.FixedZone("x", 5*3600+1800)); c.FirstByteAt = &t },
		func(c *Call) { c.Lineage.ParentCallID = "\x7f" },
	} {
		c := *full
		tok := *full.Tokens
		tok.Logprobs = slices.Clone(tok.Logprobs)
		tok.Choices = slices.Clone(tok.Choices)
		tok.Choices[0].Logprobs = slices.Clone(tok.Choices[0].Logprobs)
		lin := *full.Lineage
		c.Tokens, c.Lineage = &tok, &lin
		mutate(&c)
		cases = append(cases, &c)
	}
	return cases
}

func TestMetaWriter(t *testing.T) {
	for i, c := range metaCases() {
		checkMetaWriter(t, c)
		if t.Failed() {
			t.Fatalf("case %d", i)
		}
	}
	// It gives up only on what encoding/json rejects (the year 10000
	// among the cases; the NaN and the infinity are checkLogprobs'):
	// strings that need escapes are its own work.
	cases := metaCases()
	for i, c := range append(cases[:9:9], cases[12:]...) {
		var w metaWriter
		if w.call(c); w.failed {
			t.Errorf("case %d: the writer gave up on a call it can write", i)
		}
	}
}

// checkMetaWriter holds marshalMetaMap to encoding/json and parseMeta.
func checkMetaWriter(t *testing.T, c *Call) {
	t.Helper()
	want, werr := marshalMeta(c)
	got, mm, gerr := marshalMetaMap(nil, c, true)
	if (gerr == nil) != (werr == nil) || (gerr != nil && gerr.Error() != werr.Error()) {
		t.Fatalf("error %v, encoding/json's %v", gerr, werr)
	}
	if werr != nil {
		return
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("wrote\n%s\nencoding/json wrote\n%s", got, want)
	}
	wantMap, err := parseMeta(want)
	if err != nil || !reflect.DeepEqual(mm, wantMap) {
		t.Fatalf("map %v, parsed %v (%v)", mm, wantMap, err)
	}
	only, noMap, err := marshalMetaMap(nil, c, false)
	if err != nil || noMap != nil || !bytes.Equal(only, want) {
		t.Fatalf("without the map: %s %v %v", only, noMap, err)
	}
}

// FuzzMetaWriter: for any strings, numbers, times and token values, the
// writer's bytes and map are encoding/json's and parseMeta's, or both fail
// alike.
func FuzzMetaWriter(f *testing.F) {
	f.Add("ep", "codex", "err", int64(3), int64(1764900000123456789), float32(-0.25), float32(1e-7), uint8(0xff), 2, -5)
	f.Add("é\x00", "<&>", "\"\\", int64(-1), int64(-62135596800000000), float32(math.Inf(1)), float32(3e38), uint8(0), 0, 1)
	f.Fuzz(func(t *testing.T, s1, s2, s3 string, seq, nanos int64, f1, f2 float32, flags uint8, n1, n2 int) {
		at := time.Unix(0, nanos).UTC()
		c := &Call{Schema: CallSchema, EpisodeID: s1, Seq: seq, API: API(s2), Model: s3, Stream: flags&1 != 0,
			StartedAt: at, EndedAt: at.Add(time.Duration(n1)), Status: n2, EndReason: EndReason(s3), Error: s3,
			RequestRaw: flags&2 != 0, Upstream: s2, Harness: s1}
		if flags&4 != 0 {
			c.FirstByteAt = &at
		}
		if flags&8 != 0 {
			c.Injected = []string{s1, s2}
		}
		if flags&16 != 0 {
			c.Tokens = &Tokens{CompletionIDs: []int32{int32(n1), int32(n2)}, Logprobs: []float32{f1, f2}, Mismatch: s2}
			if flags&32 != 0 {
				c.Tokens.Choices = []ChoiceTokens{{Index: n1, Logprobs: []float32{f2}}, {CompletionIDs: []int32{}}}
			}
		}
		if flags&64 != 0 {
			c.Lineage = &Lineage{ParentCallID: s2, Kind: LineageKind(s1), CommonPrefixTokens: n1, CommonPrefixMsgs: n2, Thread: n1}
		}
		checkMetaWriter(t, c)
	})
}
