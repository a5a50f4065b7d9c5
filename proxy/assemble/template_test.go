package assemble

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/orchard-rl/orchard/internal/jsonscan"
	"github.com/orchard-rl/orchard/internal/sse"
)

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

func genVal(r *rand.Rand, depth int) string {
	switch r.IntN(9) {
	case 0:
		return "null"
	case 1:
		return pick(r, `"a"`, `"b\"c"`, `""`, `"\u00e9x"`, `"error"`, `"{\"k\":"`)
	case 2:
		return pick(r, "1", "-2", "3.5", "1e3", "0", "12345678901234567890")
	case 3:
		return pick(r, "true", "false")
	case 4:
		return pick(r, "[1,2]", "[]", `["x"]`, "[3]", "[1.5]")
	case 5:
		if depth < 2 {
			return "{" + genMembers(r, depth+1) + "}"
		}
		return "{}"
	default:
		return pick(r, `"tok"`, `" t"`, `"\n"`)
	}
}

func genMembers(r *rand.Rand, depth int) string {
	n := r.IntN(3)
	var m []string
	for range n {
		m = append(m, fmt.Sprintf("%q:%s", pick(r, "content", "reasoning", "logprob", "index", "x", "token", "text"), genVal(r, depth)))
	}
	return strings.Join(m, ",")
}

func genChoice(r *rand.Rand, idx int) string {
	var m []string
	m = append(m, fmt.Sprintf(`"index":%d`, idx))
	if r.IntN(5) > 0 {
		var d []string
		for range r.IntN(3) {
			d = append(d, fmt.Sprintf("%q:%s", pick(r, "content", "reasoning", "reasoning_content", "refusal", "role"), pick(r, `"a"`, `"tok"`, `"b\nc"`, "null", "1", `""`, `"assistant"`)))
		}
		if r.IntN(3) == 0 {
			var tcs []string
			for range 1 + r.IntN(2) {
				fn := []string{}
				if r.IntN(2) == 0 {
					fn = append(fn, fmt.Sprintf(`"name":%s`, pick(r, `"f"`, `""`, `null`)))
				}
				fn = append(fn, fmt.Sprintf(`"arguments":%s`, pick(r, `"{"`, `"\"a\":1"`, `"}"`, `""`, "null", "2")))
				tcs = append(tcs, fmt.Sprintf(`{"index":%d,%s"function":{%s}}`, r.IntN(2), pick(r, "", `"id":"c1","type":"function",`), strings.Join(fn, ",")))
			}
			d = append(d, `"tool_calls":[`+strings.Join(tcs, ",")+"]")
		}
		m = append(m, `"delta":{`+strings.Join(d, ",")+"}")
	}
	if r.IntN(2) == 0 {
		m = append(m, `"text":`+pick(r, `"a"`, `"zz"`, "null", "1"))
	}
	if r.IntN(3) == 0 {
		m = append(m, `"logprobs":`+pick(r, "null", `{"content":[{"token":"a","logprob":-1}]}`, `{"content":[{"logprob":-0.5},{"logprob":-2}]}`, `{"token_logprobs":[-1,null],"tokens":["a","b"]}`, `{"content":null}`,
			// Keys with escapes, entries without a logprob, lists beside
			// the sampled tokens' and repeated: what a shape's plan of the
			// logprob values must tell apart.
			`{"content":[{"t\u006fken":"a","logprob":-1}]}`, `{"c\u006fntent":[{"logprob":-1}]}`,
			`{"content":[{"token":"a"},{"token":"b","logprob":-2},7],"refusal":[{"logprob":-7}]}`,
			`{"refusal":[{"logprob":-3}],"content":[{"logprob":-4}],"content":[{"logprob":-5}]}`,
			`{"token_logprobs":[-1,-2],"top_logprobs":[{"a":-1}],"text_offset":[0,1]}`,
			// Entries without a value that varies: a shape with no slots.
			`{"content":[{}]}`))
	}
	if r.IntN(3) == 0 {
		m = append(m, `"token_ids":`+pick(r, "[1]", "[2,3]", "null", `["x"]`, "[]"))
	}
	if r.IntN(4) == 0 {
		m = append(m, `"finish_reason":`+pick(r, "null", `"stop"`, `"tool_calls"`))
	}
	if r.IntN(10) == 0 {
		m = append(m, `"prompt_token_ids":[5,6]`)
	}
	if r.IntN(10) == 0 {
		m = append(m, `"extra":`+genVal(r, 0))
	}
	r.Shuffle(len(m), func(i, j int) { m[i], m[j] = m[j], m[i] })
	return "{" + strings.Join(m, ",") + "}"
}

func genChunk(r *rand.Rand) string {
	var m []string
	m = append(m, `"id":"c"`, `"object":`+pick(r, `"chat.completion.chunk"`, `"text_completion"`))
	if r.IntN(8) > 0 {
		var chs []string
		for range 1 + r.IntN(2) {
			chs = append(chs, genChoice(r, r.IntN(2)))
		}
		m = append(m, `"choices":[`+strings.Join(chs, ",")+"]")
	} else {
		m = append(m, `"choices":[]`)
	}
	if r.IntN(8) == 0 {
		m = append(m, `"usage":`+pick(r, "null", `{"completion_tokens":3}`, `{"prompt_tokens":1}`))
	}
	if r.IntN(12) == 0 {
		m = append(m, `"prompt_token_ids":`+pick(r, "[1,2]", "null"))
	}
	if r.IntN(20) == 0 {
		m = append(m, `"sglext":{"output_ids":[[1],[2]],"input_ids":[9]}`)
	}
	if r.IntN(30) == 0 {
		m = append(m, `"error":{"message":"boom"}`)
	}
	return "{" + strings.Join(m, ",") + "}"
}

// TestTemplateEqualsFullParse generates chat and completions streams whose
// chunks often repeat the previous one with a few values changed (what
// templates are for), with every kind of member and value the assembler
// treats differently, and checks that assembling with templates gives
// exactly what parsing every chunk in full gives.
func TestTemplateEqualsFullParse(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	replayed := 0
	for n := range 20000 {
		body := genStream(r)
		for _, chat := range []bool{true, false} {
			fast, full := newChoices(chat), newChoices(chat)
			full.tpl.off = true
			for ev := range sse.Events(body) {
				fast.event(ev.Name, ev.Data)
				full.event(ev.Name, ev.Data)
				if fast.tpl.ok {
					replayed++
				}
			}
			api := "chat"
			got, want := fast.result(), full.result()
			if string(got.Response) != string(want.Response) || !reflect.DeepEqual(got.Tokens, want.Tokens) || string(got.Usage) != string(want.Usage) || got.Err != want.Err || got.Done != want.Done || got.Model != want.Model {
				t.Fatalf("case %d %s:\n%s\ngot  %s\n%+v\nwant %s\n%+v", n, api, body, got.Response, got.Tokens, want.Response, want.Tokens)
			}
		}
	}
	if replayed < 50000 {
		t.Fatalf("only %d chunks met a template: the test no longer exercises replay", replayed)
	}
}

// genStream generates a chat or completions stream whose chunks often
// repeat the previous one with a few values changed.
func genStream(r *rand.Rand) []byte {
	var b strings.Builder
	var prev string
	for range 1 + r.IntN(12) {
		var c string
		switch r.IntN(6) {
		case 0, 1, 2:
			if prev != "" {
				// vary only a few values of prev
				c = prev
				for _, rep := range [][2]string{{`"tok"`, pick(r, `"tok"`, `"x"`, `"a\"b"`, "null", "1")}, {"[1]", pick(r, "[1]", "[4,5]", "[]", "null")}, {`"a"`, pick(r, `"a"`, `"zz"`)}, {`-1`, pick(r, "-1", "-3", "1e999")}} {
					if r.IntN(2) == 0 {
						c = strings.Replace(c, rep[0], rep[1], 1)
					}
				}
				break
			}
			fallthrough
		default:
			c = genChunk(r)
		}
		prev = c
		b.WriteString("data: " + c + "\n\n")
	}
	if r.IntN(2) == 0 {
		b.WriteString("data: [DONE]\n\n")
	}
	return []byte(b.String())
}

// TestProgramEqualsHoles checks that a chunk the template's program
// matches is matched hole by hole too, with the same values and elements:
// the program is a faster walk of the same bytes, not a second judge.
func TestProgramEqualsHoles(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	compared, declined := 0, 0
	for range 20000 {
		body := genStream(r)
		for _, chat := range []bool{true, false} {
			c := newChoices(chat)
			for ev := range sse.Events(body) {
				if tp := c.tpl; tp.ok && tp.fused {
					switch prog, holes := matchBoth(tp, ev.Data); {
					case prog == nil:
						declined++
					case holes == nil:
						t.Fatalf("the program matched what the holes do not:\n%s\n%s", tp.data, ev.Data)
					case !reflect.DeepEqual(prog, holes):
						t.Fatalf("%s\nafter\n%s\nprogram %+v\nholes   %+v", ev.Data, tp.data, prog, holes)
					default:
						compared++
					}
				}
				c.event(ev.Name, ev.Data)
			}
		}
	}
	if compared < 10000 || declined < 100 {
		t.Fatalf("%d chunks compared, %d declined by a program: the test no longer exercises both", compared, declined)
	}
}

// matched is what a match found in a chunk, by offsets into it.
type matched struct {
	Vals  [][2]int
	Elems [][]jsonscan.Elem
	Plans [][]listKind
}

// matchBoth matches data through tp's fused program and then through the
// unfused one (hole by hole), and returns what each found (nil where it did
// not match). It leaves tp's program fused.
func matchBoth(tp *template, data []byte) (prog, holes *matched) {
	get := func() *matched {
		var m matched
		for k := range tp.got {
			v, e := tp.value(k, data), tp.elemsOf(k)
			m.Vals = append(m.Vals, [2]int{e.base, e.base + len(v.raw)})
			var spans []jsonscan.Elem // nil when empty, as the plan
			if len(e.spans) > 0 {
				spans = slices.Clone(e.spans)
			}
			m.Elems = append(m.Elems, spans)
			m.Plans = append(m.Plans, e.plan)
		}
		return &m
	}
	if tp.match(data) {
		prog = get()
	}
	tp.program(false)
	if tp.match(data) {
		holes = get()
	}
	tp.program(true)
	return prog, holes
}
