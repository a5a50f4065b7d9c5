package value

import (
	"bytes"
	"strings"
	"testing"
)

// TestConvert turns two turn lines (one with token ids and a long tool
// result, one unusable) into exactly one value pair.
func TestConvert(t *testing.T) {
	in := `{"schema":"orchard.turn/v1","episode_id":"ep1","task_id":"t1","group_id":null,"call_id":"c2","seq":2,"turn":1,"segment":0,` +
		`"prompt":[{"role":"user","content":"fix it"},{"role":"assistant","content":"ls"},{"role":"tool","content":"0123456789abcdefghéz"}],` +
		`"completion":{"role":"assistant","content":"done"},"tokens":{"prompt_ids":[1,2,3],"completion_ids":[4,5],"logprobs":[-0.1,-0.2]},` +
		`"outcome":{"episode_status":"success","episode_reward":1,"http_status":200,"end_reason":"done"}}
{"schema":"orchard.turn/v1","episode_id":"ep1","call_id":"c3","turn":-1,"completion":null,"outcome":{"episode_status":"success","unusable":"no_response"}}
`
	var out bytes.Buffer
	n, err := convert(strings.NewReader(in), &out, Options{MaxObservation: 8})
	want := `{"schema":"orchard.value/v1","episode_id":"ep1","task_id":"t1","group_id":null,"call_id":"c2","turn":1,"segment":0,` +
		`"messages":[{"role":"user","content":"fix it"},{"role":"assistant","content":"ls"},{"role":"tool","content":"0123\n[... 13 bytes cut ...]\nhéz"},` +
		`{"role":"assistant","content":"done"}],"input_ids":[1,2,3,4,5],"status":"success","outcome":1,"success":true}` + "\n"
	if err != nil || n != 1 || out.String() != want {
		t.Errorf("convert = %d, %v\n%s\nwant\n%s", n, err, out.String(), want)
	}
}

func TestConvertBadLine(t *testing.T) {
	if _, err := convert(strings.NewReader("{not json\n"), &bytes.Buffer{}, Options{}); err == nil || !strings.HasPrefix(err.Error(), "read turn: ") {
		t.Errorf("bad line: err %v", err)
	}
}
