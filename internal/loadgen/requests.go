package loadgen

import (
	"encoding/json"
	"strconv"

	"github.com/orchard-rl/orchard/internal/llmtest"
)

// tools is the tool schema every request carries, as agent harnesses send
// theirs with each call.
const tools = `[{"type":"function","function":{"name":"bash","description":"Run a shell command in the sandbox and return its output.","parameters":{"type":"object","properties":{"command":{"type":"string","description":"The command line to run."},"timeout":{"type":"integer","description":"Seconds before the command is killed."}},"required":["command"]}}},{"type":"function","function":{"name":"edit","description":"Replace a string in a file.","parameters":{"type":"object","properties":{"path":{"type":"string"},"old":{"type":"string"},"new":{"type":"string"}},"required":["path","old","new"]}}}]`

// requests builds the client's request bodies: a system prompt and tool
// schema shared by every episode, a task and tool results unique to the
// episode, and the assistant turns the upstream answered before.
type requests struct {
	head      []byte   // up to and including the system message and the comma
	tail      []byte   // from the end of messages to the end of the body
	assistant [][]byte // ,{assistant message of turn j}
	toolOut   []string // filler of turn j's tool result
}

// streamTail ends every request body; idsTail also asks for what orchard
// injects for a vLLM upstream (token ids and logprobs).
const (
	streamTail = `,"stream":true,"stream_options":{"include_usage":true}}`
	idsTail    = `,"stream":true,"stream_options":{"include_usage":true},"return_token_ids":true,"logprobs":true}`
)

// newRequests sizes the parts so that turn k's body is about promptTarget(k)
// bytes (for a 24-byte episode id).
func (s *Scenario) newRequests() *requests {
	q := &requests{
		tail: []byte(`],"tools":` + tools + streamTail),
	}
	const epLen = 24
	user := len(q.userMsg(nil, string(make([]byte, epLen))))
	head := `{"model":"` + Model + `","messages":[{"role":"system","content":""},`
	sys := max(64, s.PromptMin-len(head)-user-len(q.tail))
	q.head = []byte(`{"model":"` + Model + `","messages":[{"role":"system","content":"` + filler(sys, 1) + `"},`)
	for j := range s.Turns - 1 {
		q.assistant = append(q.assistant, assistantMsg(s.turn(j), j))
		grow := s.promptTarget(j+1) - s.promptTarget(j)
		toolMsg := len(q.toolMsg(nil, string(make([]byte, epLen)), j))
		q.toolOut = append(q.toolOut, filler(max(64, grow-len(q.assistant[j])-toolMsg), 100+j))
	}
	return q
}

// askingIDs returns q with bodies that ask for token ids and logprobs
// themselves, as orchard asks a vLLM upstream for them.
func (q *requests) askingIDs() *requests {
	c := *q
	c.tail = []byte(`],"tools":` + tools + idsTail)
	return &c
}

// assistantMsg is turn j's answer as the harness sends it back: content and
// the tool call (reasoning is not resent).
func assistantMsg(t llmtest.Turn, j int) []byte {
	c, _ := json.Marshal(t.Content.Text()) // strings always marshal
	a, _ := json.Marshal(t.ToolCalls[0].Arguments.Text())
	return []byte(`,{"role":"assistant","content":` + string(c) + `,"tool_calls":[{"id":"` + toolCallID(j) +
		`","type":"function","function":{"name":"bash","arguments":` + string(a) + `}}]}`)
}

func (q *requests) userMsg(dst []byte, episode string) []byte {
	dst = append(dst, `{"role":"user","content":"Task `...)
	dst = append(dst, episode...)
	return append(dst, `: make the failing test in proxy pass without breaking the others."}`...)
}

func (q *requests) toolMsg(dst []byte, episode string, j int) []byte {
	dst = append(dst, `,{"role":"tool","tool_call_id":"`+toolCallID(j)+`","content":"`...)
	dst = append(dst, episode...)
	dst = append(dst, ' ')
	if j < len(q.toolOut) {
		dst = append(dst, q.toolOut[j]...)
	}
	return append(dst, `"}`...)
}

// appendBody appends the body of turn k of episode to dst. episode must be
// JSON-safe (letters, digits, '-', '_', '.').
func (q *requests) appendBody(dst []byte, episode string, k int) []byte {
	dst = append(dst, q.head...)
	dst = q.userMsg(dst, episode)
	for j := range min(k, len(q.assistant)) {
		dst = append(dst, q.assistant[j]...)
		dst = q.toolMsg(dst, episode, j)
	}
	return append(dst, q.tail...)
}

// episodeID names episode n of worker w in run.
func episodeID(run string, w, n int) string {
	return run + "-w" + strconv.Itoa(w) + "-e" + strconv.Itoa(n)
}
