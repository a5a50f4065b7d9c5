package reconstruct

import (
	"testing"

	"github.com/orchard-rl/orchard/recorder"
)

// FuzzDecodeRequest checks that any body either fails to decode or
// round-trips: encoding the decoded conversation and decoding it again
// gives the same encoding. It never panics.
func FuzzDecodeRequest(f *testing.F) {
	for _, reqs := range fixtureBodies(f) {
		for _, r := range reqs {
			f.Add(string(fixtureAPIs[r.Path]), []byte(r.Body))
		}
	}
	f.Add(string(apiCompletions), []byte(`{"prompt":[1,2,3]}`))
	f.Add(string(apiMessages), []byte(`{"system":"s","messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"x"}]}]}]}`))
	f.Add(string(apiResponses), []byte(`{"input":"hi","instructions":"s"}`))
	f.Fuzz(func(t *testing.T, name string, body []byte) {
		api := recorder.API(name)
		if !Supported(api) {
			return
		}
		conv, err := DecodeRequest(api, body)
		if err != nil {
			return
		}
		enc, err := encodeRequest(conv)
		if err != nil {
			return
		}
		conv2, err := DecodeRequest(api, enc)
		if err != nil {
			t.Fatalf("re-decode of %s: %v", enc, err)
		}
		enc2, err := encodeRequest(conv2)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if !sameJSON(t, enc, enc2) {
			t.Fatalf("unstable round trip:\n%s\n%s", enc, enc2)
		}
		if !sameJSON(t, enc, body) {
			t.Fatalf("round trip changed the body:\n got %s\nwant %s", enc, body)
		}
	})
}

// FuzzEpisode feeds arbitrary request and response bodies through
// reconstruction: it never panics and never fails on bad records.
func FuzzEpisode(f *testing.F) {
	f.Add(string(apiChat), []byte(`{"messages":[{"role":"user","content":"a"}]}`), []byte(`{"choices":[{"message":{"role":"assistant","content":"b"}}]}`))
	f.Add(string(apiMessages), []byte(`{"messages":[{"role":"user","content":"a","cache_control":{}}]}`), []byte(`{"content":[{"type":"text","text":"b"}]}`))
	f.Fuzz(func(t *testing.T, name string, req, resp []byte) {
		api := recorder.API(name)
		s := newSim(apiChat, "ep", 1, false)
		th := s.newThread("sys")
		s.user(th, "a")
		s.call(th, s.reply(0, "x"))
		c := *s.calls[0]
		c.API, c.Request, c.Response, c.CallID = api, req, resp, "fz"
		c.Seq = 2
		src := newMemSource()
		src.add(recorderEpisode("ep"), append(s.calls, &c))
		for _, format := range Formats {
			exportLines(t, src, Options{Format: format, Check: true, Workers: 1})
		}
	})
}
