package proxy

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/orchard-rl/orchard/proxy/assemble"
	"github.com/orchard-rl/orchard/recorder"
)

// TestStripTemplate strips generated vLLM-style streams (chunks that repeat
// the previous one with token ids, logprobs and text changed, mixed with
// fresh chunks, usage chunks, null and missing fields, several choices)
// through a stripper feeding an assembler, which replays most chunks
// through the assembler's template, and event by event through the rules'
// lookups, which do not: the bytes must be identical.
func TestStripTemplate(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 9))
	ruleSets := []stripRules{
		{fields: []assemble.Unseen{{Name: "prompt_token_ids"}, {Name: "token_ids", PerChoice: true}, {Name: "logprobs", PerChoice: true}}},
		{usage: true, fields: []assemble.Unseen{{Name: "prompt_token_ids"}, {Name: "token_ids", PerChoice: true}}},
		{usage: true, nullUsage: true},
		{fields: []assemble.Unseen{{Name: "token_ids", PerChoice: true, Remove: true}}},
	}
	replayed := 0
	for n := range 3000 {
		body := genStream(r)
		for ri, rules := range ruleSets {
			var want []byte
			for _, ev := range splitEvents(body) {
				want = rules.apply(want, ev)
			}
			asm, err := assemble.NewStreamer(recorder.APIChatCompletions)
			if err != nil {
				t.Fatal(err)
			}
			asm.Hide(rules.fields)
			s := newStripper(io.NopCloser(&pieceReader{b: body, r: r}), rules, asm)
			got, err := io.ReadAll(s)
			if err != nil {
				t.Fatal(err)
			}
			replayed += s.replayed
			s.Close()
			if !bytes.Equal(got, want) {
				t.Fatalf("case %d rules %d:\n%s\ngot\n%s\nwant\n%s", n, ri, body, got, want)
			}
		}
	}
	if replayed < 10000 {
		t.Fatalf("only %d events were replayed through a template: the test no longer exercises it", replayed)
	}
}

// FuzzStripperReplay strips a stream twice, with an assembler (which
// replays chunks through its template) and without one (every chunk looked
// up): the bytes must be identical, and the assembler must assemble what
// it would from the raw bytes.
func FuzzStripperReplay(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 5))
	for range 20 {
		f.Add(genStream(r), uint8(r.IntN(256)))
	}
	ruleSets := []stripRules{
		{fields: []assemble.Unseen{{Name: "prompt_token_ids"}, {Name: "token_ids", PerChoice: true}, {Name: "logprobs", PerChoice: true}}},
		{usage: true, continuous: true, fields: []assemble.Unseen{{Name: "token_ids", PerChoice: true}}},
		{usage: true, nullUsage: true, fields: []assemble.Unseen{{Name: "logprobs", PerChoice: true}}},
	}
	f.Fuzz(func(t *testing.T, body []byte, pick uint8) {
		rules := ruleSets[int(pick)%len(ruleSets)]
		want, err := io.ReadAll(newStripper(io.NopCloser(bytes.NewReader(body)), rules, nil))
		if err != nil {
			t.Fatal(err)
		}
		api := recorder.APIChatCompletions
		if pick&0x80 != 0 {
			api = recorder.APICompletions
		}
		asm, err := assemble.NewStreamer(api)
		if err != nil {
			t.Fatal(err)
		}
		asm.Hide(rules.fields)
		src := &pieceReader{b: body, r: rand.New(rand.NewPCG(uint64(pick), 1))}
		got, err := io.ReadAll(newStripper(io.NopCloser(src), rules, asm))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("replayed:\n%q\nlooked up:\n%q", got, want)
		}
		ref, err := assemble.NewStreamer(api)
		if err != nil {
			t.Fatal(err)
		}
		ref.Hide(rules.fields)
		ref.Write(body)
		if a, b := asm.Result(), ref.Result(); !reflect.DeepEqual(a, b) {
			t.Fatalf("assembled event by event:\n%+v\nfrom the bytes:\n%+v", a, b)
		}
	})
}

// pieceReader returns b in random pieces, so events arrive split.
type pieceReader struct {
	b []byte
	r *rand.Rand
}

func (p *pieceReader) Read(out []byte) (int, error) {
	if len(p.b) == 0 {
		return 0, io.EOF
	}
	n := copy(out[:min(len(out), 1+p.r.IntN(700))], p.b)
	p.b = p.b[n:]
	return n, nil
}

func splitEvents(body []byte) [][]byte {
	var out [][]byte
	for _, ev := range bytes.SplitAfter(body, []byte("\n\n")) {
		if len(ev) > 0 {
			out = append(out, ev)
		}
	}
	return out
}

func genStream(r *rand.Rand) []byte {
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	choice := func(i int) string {
		m := []string{fmt.Sprintf(`"index":%d`, i), `"delta":{"content":` + pick(`"a"`, `"tok"`, `"b\"c"`) + `}`}
		if r.IntN(4) > 0 {
			m = append(m, `"logprobs":`+pick("null", `{"content":[{"token":"a","logprob":-1}]}`, `{"content":[]}`, `{"content":[{"token":"b","bytes":[98],"logprob":-2.5,"top_logprobs":[{"token":"c","logprob":-3}]}, {"logprob":null,"token":"d"},{"token":"e"}],"refusal":[1,{"x":[2]}]}`, `{"x":{"content":[1]},"content":[ {"top_logprobs":[{"logprob":-7}],"logprob":-0.5} ]}`))
		}
		if r.IntN(4) > 0 {
			m = append(m, `"token_ids":`+pick("[1]", "[2,3]", "null", "[]", `"x"`, "7"))
		}
		m = append(m, `"finish_reason":`+pick("null", "null", "null", `"stop"`))
		r.Shuffle(len(m), func(a, b int) { m[a], m[b] = m[b], m[a] })
		return "{" + strings.Join(m, ",") + "}"
	}
	chunk := func() string {
		var chs []string
		for i := range r.IntN(3) {
			chs = append(chs, choice(i))
		}
		m := []string{`"id":"c1"`, `"object":"chat.completion.chunk"`, `"choices":[` + strings.Join(chs, ",") + `]`}
		switch r.IntN(6) {
		case 0:
			m = append(m, `"usage":null`)
		case 1:
			m = append(m, `"usage":{"completion_tokens":3}`)
		}
		if r.IntN(5) == 0 {
			m = append(m, `"prompt_token_ids":`+pick("[1,2]", "null"))
		}
		return "{" + strings.Join(m, ",") + "}"
	}
	var b strings.Builder
	prev := ""
	for range 1 + r.IntN(12) {
		c := chunk()
		if prev != "" && r.IntN(3) > 0 {
			c = prev
			for _, rep := range [][2]string{{"[1]", pick("[1]", "[9]", "[4,5]", "null", "[]")}, {"-1", pick("-1", "-2.5", "1e999")}, {`"tok"`, pick(`"tok"`, `"x"`)}, {"[2,3]", pick("[2,3]", "[8]", `"s"`)}} {
				if r.IntN(2) == 0 {
					c = strings.Replace(c, rep[0], rep[1], 1)
				}
			}
		}
		prev = c
		b.WriteString("data: " + c + "\n\n")
	}
	b.WriteString("data: [DONE]\n\n")
	return []byte(b.String())
}

// apply appends ev to dst with the injected fields removed by looking them
// up, without a template: the reference TestStripTemplate compares with.
func (r stripRules) apply(dst, ev []byte) []byte {
	start, end := dataJSON(ev, -1)
	if start < 0 {
		return append(dst, ev...)
	}
	dst = append(dst, ev[:start]...)
	dst, drop := r.appendRewritten(dst, ev[start:end], true)
	if drop {
		return dst[:len(dst)-start] // the usage-only chunk the client did not ask for
	}
	return append(dst, ev[end:]...)
}

// TestStripperFeedsAssembler strips generated streams while the stripper
// feeds an assembler event by event (validated chunks handed over as such),
// as the proxy does on the token path, and compares what it assembled with
// the assembly of the same bytes fed as bytes: the results must be equal,
// also with a byte order mark, comment and odd data lines, an unterminated
// tail, and a client that leaves mid-stream.
func TestStripperFeedsAssembler(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(11, 13))
	rules := []stripRules{
		{fields: []assemble.Unseen{{Name: "prompt_token_ids"}, {Name: "token_ids", PerChoice: true}, {Name: "logprobs", PerChoice: true}}},
		{usage: true, fields: []assemble.Unseen{{Name: "token_ids", PerChoice: true, Remove: true}}},
	}
	for n := range 2000 {
		body := genStream(r)
		switch r.IntN(8) {
		case 0:
			body = append([]byte("\xEF\xBB\xBF"), body...)
		case 1:
			body = bytes.Replace(body, []byte("data: "), []byte(": ping\n\ndata:"), 1)
		case 2:
			body = bytes.Replace(body, []byte("data: "), []byte("data:  "), 2)
		case 3:
			body = body[:len(body)-1-r.IntN(len(body)/2)] // unterminated tail
		case 4:
			body = bytes.Replace(body, []byte("\n\n"), []byte("\r\n\r\n"), -1)
		}
		api := recorder.APIChatCompletions
		asm, err := assemble.NewStreamer(api)
		if err != nil {
			t.Fatal(err)
		}
		src := &pieceReader{b: body, r: r}
		s := newStripper(io.NopCloser(src), rules[n%len(rules)], asm)
		if r.IntN(4) == 0 {
			// The client leaves: the proxy stops reading and closes.
			io.ReadFull(s, make([]byte, r.IntN(len(body)+1)))
		} else if _, err := io.ReadAll(s); err != nil {
			t.Fatal(err)
		}
		read := body[:len(body)-len(src.b)]
		s.Close()
		got, want := asm.Result(), assemble.Stream(api, read)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("case %d:\n%q\nevent by event:\n%+v\nas bytes:\n%+v", n, read, got, want)
		}
	}
}

// TestStripperCallerBuffers reads stripped streams with buffers of every
// kind of size, as the ReverseProxy (32 KiB) and other callers do: the
// stripper reads the upstream into the caller's buffer when it is big
// enough and frames the events there, so the output must equal the
// event-by-event reference whatever the buffer, and the assembly must not
// depend on bytes the caller overwrites after each read.
func TestStripperCallerBuffers(t *testing.T) {
	t.Parallel()
	rules := stripRules{usage: true, fields: []assemble.Unseen{{Name: "prompt_token_ids"}, {Name: "token_ids", PerChoice: true}, {Name: "logprobs", PerChoice: true}}}
	sizes := []int{1, 100, minStripRead - 1, minStripRead, 5000, 32 << 10}
	r := rand.New(rand.NewPCG(17, 19))
	for n := range 240 {
		var body []byte
		for range 1 + r.IntN(40) {
			body = append(body, genStream(r)...)
		}
		var want []byte
		for _, ev := range splitEvents(body) {
			want = rules.apply(want, ev)
		}
		var src io.Reader = bytes.NewReader(body) // fills the caller's buffer
		if n%2 == 1 {
			src = &pieceReader{b: body, r: r}
		}
		asm, err := assemble.NewStreamer(recorder.APIChatCompletions)
		if err != nil {
			t.Fatal(err)
		}
		asm.Hide(rules.fields)
		s := newStripper(io.NopCloser(src), rules, asm)
		size := sizes[n%len(sizes)]
		got := readClobbering(t, s, size)
		s.Close()
		if !bytes.Equal(got, want) {
			t.Fatalf("case %d, %d-byte reads:\n%q\nwant\n%q", n, size, got, want)
		}
		ref, _ := assemble.NewStreamer(recorder.APIChatCompletions)
		ref.Hide(rules.fields)
		ref.Write(body)
		if a, b := asm.Result(), ref.Result(); !reflect.DeepEqual(a, b) {
			t.Fatalf("case %d, %d-byte reads: assembled\n%+v\nfrom the bytes:\n%+v", n, size, a, b)
		}
	}
}

// readClobbering reads r to the end through one buffer of the given size,
// overwriting it after each read as a caller reusing it would.
func readClobbering(t *testing.T, r io.Reader, size int) []byte {
	t.Helper()
	buf := make([]byte, size)
	var out []byte
	for {
		n, err := r.Read(buf)
		out = append(out, buf[:n]...)
		for i := range buf {
			buf[i] = 'X'
		}
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
