package recorder

import (
	"encoding/json"
	"fmt"
	"strings"
)

// growingEpisode returns a chat episode of turns calls whose history grows
// by about msgBytes per turn, as an agent harness resends it: call t has
// the system prompt, the tools and 2t messages. Token ids extend too.
func growingEpisode(turns, msgBytes int) []*Call {
	tools := `[{"type":"function","function":{"name":"bash","description":"` + strings.Repeat("run a command. ", 40) +
		`"}},{"type":"function","function":{"name":"edit","description":"` + strings.Repeat("edit a file. ", 40) + `"}}]`
	var msgs []string
	msgs = append(msgs, `{"role":"system","content":"`+strings.Repeat("You are a coding agent. ", 60)+`"}`)
	var prompt []int32
	calls := make([]*Call, turns)
	for t := range turns {
		user := fmt.Sprintf(`{"role":"user","content":%q}`, filler(t, msgBytes/2))
		msgs = append(msgs, user)
		c := testCall("ep-grow", fmt.Sprintf("call-%04d", t), t)
		c.Request = json.RawMessage(`{"model":"m","messages":[` + strings.Join(msgs, ",") + `],"tools":` + tools + `,"stream":true}`)
		answer := filler(t+100000, msgBytes/2)
		c.Response = json.RawMessage(fmt.Sprintf(`{"id":"r%d","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}]}`, t, answer))
		prompt = append(prompt, ids(t, msgBytes/8)...)
		completion := ids(t+100000, msgBytes/8)
		c.Tokens = &Tokens{PromptIDs: append([]int32(nil), prompt...), CompletionIDs: completion}
		prompt = append(prompt, completion...)
		msgs = append(msgs, fmt.Sprintf(`{"role":"assistant","content":%q}`, answer))
		calls[t] = c
	}
	return calls
}

// filler returns n bytes of word-like text that differs per seed, so that
// compression has roughly the redundancy of real prose, not more.
func filler(seed, n int) string {
	words := []string{"file", "the", "func", "return", "error", "test", "main.go", "build", "ok", "value", "x := y", "if err != nil {", "}", "package", "go", "run"}
	var b strings.Builder
	s := uint64(seed)*2654435761 + 1
	for b.Len() < n {
		s ^= s << 13
		s ^= s >> 7
		s ^= s << 17
		b.WriteString(words[s%uint64(len(words))])
		fmt.Fprintf(&b, "%d ", s%1000)
	}
	return b.String()[:n]
}

func ids(seed, n int) []int32 {
	out := make([]int32, n)
	s := uint64(seed)*11400714819323198485 + 7
	for i := range out {
		s ^= s << 13
		s ^= s >> 7
		s ^= s << 17
		out[i] = int32(s % 150000)
	}
	return out
}
