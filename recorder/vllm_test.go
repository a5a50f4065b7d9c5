package recorder

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
)

// vllmEpisode returns turns chat calls as vLLM records them: each prompt
// continues the previous prompt and completion, and the response carries
// the prompt ids again as top-level prompt_token_ids (the duplicate the
// v2 document stores once).
func vllmEpisode(turns int) []*Call {
	r := rand.New(rand.NewPCG(1, 2))
	ids := func(n int) []int32 {
		out := make([]int32, n)
		for i := range out {
			out[i] = r.Int32N(151000)
		}
		return out
	}
	prompt := ids(2000)
	var calls []*Call
	msgs := []json.RawMessage{json.RawMessage(`{"role":"system","content":"you are an agent"}`)}
	for n := 1; n <= turns; n++ {
		c := testCall("vllm", fmt.Sprintf("vllm-%03d", n), n)
		msgs = append(msgs, json.RawMessage(fmt.Sprintf(`{"role":"user","content":"step %d"}`, n)))
		c.Request, _ = json.Marshal(map[string]any{"model": "m", "messages": msgs})
		out := ids(100)
		lps := make([]float32, len(out))
		for i := range lps {
			lps[i] = -r.Float32() * 3
		}
		c.Tokens = &Tokens{PromptIDs: prompt, CompletionIDs: out, Logprobs: lps}
		c.Response = vllmResponse(n, prompt, out, lps)
		calls = append(calls, c)
		msgs = append(msgs, json.RawMessage(fmt.Sprintf(`{"role":"assistant","content":"answer %d"}`, n)))
		prompt = append(append(append([]int32{}, prompt...), out...), ids(50)...)
	}
	return calls
}

func vllmResponse(n int, prompt, out []int32, lps []float32) json.RawMessage {
	var lp []byte
	for i, v := range lps {
		if i > 0 {
			lp = append(lp, ',')
		}
		lp = fmt.Appendf(lp, `{"token":"t%d","logprob":%s}`, out[i], strconv.FormatFloat(float64(v), 'g', -1, 64))
	}
	b := fmt.Appendf(nil, `{"id":"chatcmpl-%d","object":"chat.completion","created":1764800000,"model":"m",`, n)
	b = fmt.Appendf(b, `"choices":[{"index":0,"message":{"role":"assistant","content":"answer %d"},"logprobs":{"content":[%s]},"finish_reason":"stop","token_ids":%s}],`, n, lp, jsonIDs(out))
	b = fmt.Appendf(b, `"usage":{"prompt_tokens":%d,"completion_tokens":%d},"prompt_token_ids":%s,"kv_transfer_params":null}`, len(prompt), len(out), jsonIDs(prompt))
	return b
}

func jsonIDs[T int32 | int64](ids []T) []byte {
	b, _ := json.Marshal(ids)
	return b
}

// TestVLLMRecordSize reports what a vLLM chat episode costs stored, and
// checks it decodes back and that a call's prompt ids are not stored in
// full again in its response: its unit stays far below its response (it
// was half of it when each response kept its prompt_token_ids).
func TestVLLMRecordSize(t *testing.T) {
	calls := vllmEpisode(30)
	var s storedEpisode
	e := NewEpisodeEncoder(true)
	for _, c := range calls {
		s.write(t, e, c)
	}
	assertSameCalls(t, s.read(t), calls)
	last := calls[len(calls)-1]
	spill, err := MarshalCall(last)
	if err != nil {
		t.Fatal(err)
	}
	if u := len(s.units[len(s.units)-1]); u*8 > len(last.Response) {
		t.Errorf("last call stored in %d bytes, want under 1/8 of its %d-byte response", u, len(last.Response))
	}
	t.Logf("30-turn vLLM episode: %d bytes stored; last call: %d bytes stored, %d bytes self-contained (spill), response %d bytes",
		s.size(), len(s.units[len(s.units)-1]), len(spill), len(last.Response))
}
