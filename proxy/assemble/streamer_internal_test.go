package assemble

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/orchard-rl/orchard/internal/sse"
)

// TestOneDataLine holds the shortcut to sse.Parse: where it applies, Parse
// finds a nameless event whose data is exactly valid.
func TestOneDataLine(t *testing.T) {
	t.Parallel()
	for _, ev := range []string{
		"data: {}\n\n", "data:{}\n\n", "data:  {}\n\n", "data: {}\r\n\r\n", "data: {}\n",
		"event: x\ndata: {}\n\n", "data: {}\n\nx", "data: {\"a\":1}\n\n", "data: {} \n\n", "dat: {}\n\n",
	} {
		raw := []byte(ev)
		i := bytes.IndexByte(raw, '{')
		for _, end := range []int{i + 2, len(raw) - 2} {
			if end < i || end > len(raw) {
				continue
			}
			valid := raw[i:end]
			p := sse.Parse(raw)
			want := p.HasData && p.Name == "" && len(p.Data) == len(valid) && &p.Data[0] == &valid[0]
			if got := oneDataLine(raw, valid); got && !want {
				t.Errorf("%q, %q: shortcut, but Parse gives %+v", ev, valid, p)
			}
		}
	}
	if !oneDataLine([]byte("data: {}\n\n"), []byte("data: {}\n\n")[6:8]) {
		t.Error("the usual event takes no shortcut")
	}
}

// TestPromptChunkNotTemplate: the chunk that brings a vLLM stream's
// prompt ids does not become the template, whose buffer the chunks after
// it reuse: the template holds a token chunk's bytes, not the prompt's
// kilobytes, and the token chunks still replay through it.
func TestPromptChunkNotTemplate(t *testing.T) {
	t.Parallel()
	ids := []byte("1000")
	for i := 1; i < 3000; i++ {
		ids = fmt.Appendf(ids, ",%d", 1000+i)
	}
	c := newChoices(true)
	const head = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,`
	c.event("", []byte(head+`"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"prompt_token_ids":[`+string(ids)+`]}`))
	for i := range 4 {
		c.event("", fmt.Appendf(nil, head+`"delta":{"content":"t%d"},"logprobs":null,"finish_reason":null,"token_ids":[%d]}]}`, i, 20000+i))
	}
	if len(c.prompt.ids) != 3000 || c.prompt.ids[2999] != 3999 {
		t.Fatalf("prompt ids %d, want 3000", len(c.prompt.ids))
	}
	if !c.tpl.ok || cap(c.tpl.data) > 1<<10 {
		t.Errorf("template ok %v, holding %d bytes of capacity; want a token chunk's", c.tpl.ok, cap(c.tpl.data))
	}
	if got := c.choice(0).ids.ids; len(got) != 4 || got[3] != 20003 {
		t.Errorf("completion ids %v, want 20000..20003", got)
	}
}
