package lineage

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/recorder"
)

// extractBoth runs extract on req and resp with jsonscan and with gjson
// only, and fails if the two differ in anything they return or fill; where
// both are valid JSON (or empty), also with the scans told so (a call
// whose Checked is set), which must not differ either.
func extractBoth(t *testing.T, api recorder.API, req, resp []byte) {
	t.Helper()
	run := func(gjsonOnly, checked bool) (string, bool, seqInput[uint64]) {
		var in seqInput[uint64]
		x := extractor{in: &in, memo: make(map[uint64]uint64), gjsonOnly: gjsonOnly, checked: checked}
		prev, ok := x.extract(api, req, resp)
		return prev, ok, in
	}
	prev1, ok1, in1 := run(false, false)
	prev2, ok2, in2 := run(true, false)
	if prev1 != prev2 || ok1 != ok2 || !reflect.DeepEqual(in1, in2) {
		t.Fatalf("%s %q %q:\njsonscan: %q %v %+v\ngjson:    %q %v %+v", api, req, resp, prev1, ok1, in1, prev2, ok2, in2)
	}
	validOrEmpty := func(b []byte) bool { return len(b) == 0 || json.Valid(b) }
	if !validOrEmpty(req) || !validOrEmpty(resp) {
		return
	}
	prev3, ok3, in3 := run(false, true)
	if prev3 != prev2 || ok3 != ok2 || !reflect.DeepEqual(in3, in2) {
		t.Fatalf("%s %q %q:\nchecked: %q %v %+v\ngjson:   %q %v %+v", api, req, resp, prev3, ok3, in3, prev2, ok2, in2)
	}
}

var diffAPIs = []recorder.API{recorder.APIChatCompletions, recorder.APIResponses, recorder.APIMessages}

// diffSeeds are requests and responses where the jsonscan walk must step
// aside for gjson or match it closely: escaped and repeated keys,
// invalid JSON before and after the fields read, choices out of order.
var diffSeeds = [][2]string{
	{`{"messages":[{"role":"system","content":"s"},{"content":"u","role":"user"}]}`, `{"choices":[{"logprobs":{"content":[{"token":"a","logprob":-1}]},"message":{"role":"assistant","content":"x"},"index":0}],"prompt_token_ids":[1,2,3]}`},
	{`{"messages":[{"role":"sys\u0074em","content":"s"}]}`, `{"choices":[{"index":1,"message":{"content":"a"}},{"index":0,"message":{"content":"b"}}]}`},
	{`{"mess\u0061ges":[{"role":"user"}],"messages":[{"r\u006fle":"system","role":"user"}]}`, `{"ch\u006fices":[],"choices":[{"ind\u0065x":1,"index":0,"message":1}]}`},
	{`{"messages":[1,"x",null,[{"role":"system"}]],"messages":[{"role":"developer"}]}`, `{"choices":[{"index":"0","message":{"content":null}},{"index":0.0,"message":"m"},{"index":1e400},7,"s"]}`},
	{` {"messages":[{"role":"user","content":"a"}]} x`, `{"choices":[{"index":0,"message":{"content":"a"}}]} trailing`},
	{`{"messages":[{"role":"user","content":"a"}]}`, `{"id":"r",bad,"choices":[{"index":0,"message":{}}]}`},
	{`{"messages":[{"role":"user","content":"a"}]}`, `{"choices":[{"index":0,"message":{"content":"a"},"logprobs":{bad}}],"prompt_token_ids":[1,`},
	{`{"messages":[{"role":"user","role":"system","content":"a"}],"tools":[{"type":"function"}],"functions":null}`, `{"choices":{"index":0},"choices":[]}`},
	{`{"input":[{"role":"system","content":"a"},{"type":"reasoning"},{"role":"user","content":[{"type":"input_text","text":"b"}]}],"instructions":"i","previous_response_id":"r\u0031"}`, `{"id":"r2","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"c"}]}]}`},
	{`{"system":"s","messages":[{"role":"user","content":[{"type":"text","text":"a"}]}]}`, `{"role":"assistant","content":[{"type":"text","text":"b"}]}`},
	{`[{"messages":[]}]`, `[]`},
	{`{}`, `{}`},
	{`{"messages":[{"role":"user","content":"a"}]}`, `{"choices":[{"index":0,"message":{"content":"a"}}]`},
	{"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}", "{\"choices\" : [ { \"index\" : 0 , \"message\" : { \"content\" : \"a\\\"\" } } ] }"},
}

// FuzzExtractDiff holds the jsonscan extraction to the gjson one over the
// drift corpus, the seeds of FuzzObserveJSON and diffSeeds.
func FuzzExtractDiff(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(corpusDir, "*.jsonl"))
	for _, path := range files {
		for _, c := range readCorpus(f, path) {
			for a := range diffAPIs {
				f.Add(uint8(a), []byte(c.Request), []byte(c.Response))
			}
		}
	}
	f.Add(uint8(1), []byte(`{"input":"hi","previous_response_id":"r1"}`), []byte(`{"id":"r2","output":[]}`))
	f.Add(uint8(0), []byte(`{"prompt":["a"]}`), []byte(`{"choices":[{"text":"b","index":3}]}`))
	f.Add(uint8(2), []byte(`{"messages":"x","system":[[[[]]]]}`), []byte(`{"content":[{"type":"tool_use","input":{"a":[1e400]}}]}`))
	for _, s := range diffSeeds {
		for a := range diffAPIs {
			f.Add(uint8(a), []byte(s[0]), []byte(s[1]))
		}
	}
	for _, c := range vllmEpisode(3) {
		f.Add(uint8(0), []byte(c.Request), []byte(c.Response))
	}
	f.Fuzz(func(t *testing.T, api uint8, req, resp []byte) {
		extractBoth(t, diffAPIs[int(api)%len(diffAPIs)], req, resp)
	})
}

// TestToolCallAsGet holds toolCall's one walk to the three gjson lookups
// it replaced, on calls shaped right and wrong.
func TestToolCallAsGet(t *testing.T) {
	for _, c := range []string{
		`{"id":"call_1","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}}`,
		`{"function":{"arguments":"{}","name":"f"},"id":"x"}`,
		`{"id":"a","id":"b","function":{"name":"n","name":"m","arguments":"1","arguments":"2"}}`,
		`{"function":{"name":"first"},"function":{"name":"second","arguments":"x"}}`,
		`{"function":"bash","id":7}`,
		`{"function":null}`, `{}`, `[]`, `"call"`, `{"i\u0064":"esc","function":{"n\u0061me":"esc"}}`,
		`{"function":{"name":{"nested":1},"arguments":[1,2]}}`,
	} {
		r := gjson.Parse(c)
		id, name, args := toolCall(r)
		for _, p := range []struct {
			got  gjson.Result
			path string
		}{{id, "id"}, {name, "function.name"}, {args, "function.arguments"}} {
			if want := r.Get(p.path); p.got.Raw != want.Raw || p.got.Str != want.Str {
				t.Errorf("%s: %s = %q, Get says %q", c, p.path, p.got.Raw, want.Raw)
			}
		}
	}
}
