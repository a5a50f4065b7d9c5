package proxy

import (
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/orchard-rl/orchard/internal/jsonscan"
)

// memberSeeds are request bodies with the members the proxy reads in the
// places and spellings that could trip a walk of the top level.
var memberSeeds = []string{
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`,
	"  \n{ \"model\" : \"m\" ,\"stream\":false , \"stream_options\" : {\"include_usage\":false,\"continuous_usage_stats\":true} }\n\n",
	`{}`,
	" { \t} ",
	`{"messages":[{"model":"inner","logprobs":true}],"model":"outer","stream_options":null}`,
	`{"model":"a","model":"b","logprobs":false,"logprobs":true}`,
	`{"mod\u0065l":"escaped","stream":true}`,
	`{"model":"m","return_token_ids":false,"top_logprobs":3,"logprobs":null}`,
	`{"x":"}{\"model\":1","stream":true,"n":2}`,
	`{"model":"\u00e9\"q","stream":1,"logprobs":0,"prompt":"a}"}`,
	`[{"model":"m"}]`,
	`"model"`,
	`12`,
}

// FuzzRequestMembers holds the one-pass member walk to gjson's lookups,
// and the appended patch to sjson setting the same paths one by one.
func FuzzRequestMembers(f *testing.F) {
	for _, s := range memberSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !json.Valid(body) {
			if _, ok := readMembers(body); ok {
				t.Fatalf("readMembers(%q) takes it for JSON", body)
			}
			return
		}
		m, ok := readMembers(body)
		if !ok {
			t.Fatalf("readMembers(%q) says it is not JSON", body)
		}
		for k := range nMembers {
			checkMember(t, body, memberKeys[k], m.get(reqMember(k)))
		}
		checkAppended(t, m)
	})
}

func TestRequestMembersWalk(t *testing.T) {
	walked := 0
	for _, s := range memberSeeds {
		m, ok := readMembers([]byte(s))
		if !ok {
			t.Fatalf("readMembers(%q) says it is not JSON", s)
		}
		for k := range nMembers {
			checkMember(t, []byte(s), memberKeys[k], m.get(reqMember(k)))
		}
		checkAppended(t, m)
		if m.walked {
			walked++
		}
	}
	// The escaped key and the three non-objects go to gjson.
	if want := len(memberSeeds) - 4; walked != want {
		t.Fatalf("walked %d seeds, want %d", walked, want)
	}
	m, _ := readMembers([]byte(memberSeeds[4]))
	if got := m.get(memModel).String(); got != "outer" {
		t.Fatalf("model = %q, want the top level's", got)
	}
}

func checkMember(t *testing.T, body []byte, key string, got gjson.Result) {
	t.Helper()
	want := gjson.GetBytes(body, key)
	if got.Type != want.Type || got.Raw != want.Raw || got.Str != want.Str || got.Num != want.Num {
		t.Fatalf("%q in %q: walk %#v, gjson %#v", key, body, got, want)
	}
}

// checkAppended compares, for every set of members the body lacks, the
// appended patch with sjson's.
func checkAppended(t *testing.T, m *reqMembers) {
	t.Helper()
	all := []struct {
		path string
		add  memberAdd
		v    any
	}{
		{"stream_options.include_usage", memberAdd{memStreamOptions, `{"include_usage":true}`}, true},
		{"return_token_ids", memberAdd{memReturnTokenIDs, "true"}, true},
		{"logprobs", memberAdd{memLogprobs, "1"}, 1},
	}
	for mask := 1; mask < 1<<len(all); mask++ {
		var p patch
		for i, a := range all {
			if mask&(1<<i) != 0 {
				p.add(m, a.path, a.add.key, a.add.raw, a.v)
			}
		}
		if p.slow {
			continue
		}
		want := m.body
		for i, path := range p.paths {
			var err error
			if want, err = sjson.SetBytes(want, path, p.vals[i]); err != nil {
				t.Fatalf("sjson %s on %q: %v", path, m.body, err)
			}
		}
		sent := m.withAppended(p.adds)
		got := sentString(t, sent)
		if got != string(want) || sent.len() != len(want) {
			t.Fatalf("patch %v of %q:\n got %s (len %d)\nwant %s", p.paths, m.body, got, sent.len(), want)
		}
		// The body's part is the client's own bytes, not a copy.
		if len(sent.head) > 0 && unsafe.SliceData(sent.head) != &m.body[jsonscan.SkipSpace(m.body, 0)] {
			t.Fatalf("patch %v of %q: the head is a copy of the client's body", p.paths, m.body)
		}
		if again := sentString(t, sent); again != got {
			t.Fatalf("a second reader (GetBody) gave %s, want %s", again, got)
		}
	}
}

// BenchmarkPatchRequest measures reading an agent's request (a 9 KB history
// before the members the proxy reads) and adding the token fields, as the
// walk and the appended members do it, and as one gjson lookup and one sjson
// copy per member did.
func BenchmarkPatchRequest(b *testing.B) {
	msgs := make([]map[string]string, 0, 40)
	for i := range 40 {
		msgs = append(msgs, map[string]string{"role": "user", "content": strings.Repeat("a \"quoted\" line of tool output\n", 7) + strconv.Itoa(i)})
	}
	hist, _ := json.Marshal(msgs)
	body := []byte(`{"model":"qwen","messages":` + string(hist) + `,"tools":[],"stream":true,"stream_options":{"include_usage":true}}`)
	b.Run("walk", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			m, _ := readMembers(body)
			_ = m.get(memModel).String()
			var p patch
			p.add(m, "return_token_ids", memReturnTokenIDs, "true", true)
			p.add(m, "logprobs", memLogprobs, "true", true)
			if p.apply(m).len() <= len(body) {
				b.Fatal("not patched")
			}
		}
	})
	b.Run("lookups", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			_ = gjson.GetBytes(body, "model").String()
			for _, k := range []string{"stream", "stream_options.include_usage", "return_token_ids", "top_logprobs", "logprobs"} {
				_ = gjson.GetBytes(body, k)
			}
			out, _ := sjson.SetBytes(body, "return_token_ids", true)
			out, _ = sjson.SetBytes(out, "logprobs", true)
			if len(out) <= len(body) {
				b.Fatal("not patched")
			}
		}
	})
}

// sentString reads a body as it goes upstream.
func sentString(t *testing.T, s sentBody) string {
	t.Helper()
	b, err := io.ReadAll(s.reader())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
