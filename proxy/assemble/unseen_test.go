package assemble

import (
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/orchard-rl/orchard/internal/sse"
	"github.com/orchard-rl/orchard/recorder"
)

// TestHide assembles generated streams with and without hidden members,
// through templates and in full: hiding changes nothing but the hidden
// members of the response, which show as null (or are gone, for Remove)
// wherever the plain assembly has them, and the tokens stay the same.
func TestHide(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	hidden := 0
	for n := range 5000 {
		body := genStream(r)
		for _, chat := range []bool{true, false} {
			for _, remove := range []bool{false, true} {
				u := []Unseen{{Name: "logprobs", PerChoice: true}, {Name: "token_ids", PerChoice: true, Remove: remove},
					{Name: "prompt_token_ids", PerChoice: !chat, Remove: remove}}
				plain := newChoices(chat)
				for ev := range sse.Events(body) {
					plain.event(ev.Name, ev.Data)
				}
				want := plain.result()
				wantResp := hideIn(t, want.Response, u)
				hidden += boolInt(string(wantResp) != string(want.Response))
				for _, tplOff := range []bool{false, true} {
					api := recorder.APICompletions
					if chat {
						api = recorder.APIChatCompletions
					}
					s, _ := NewStreamer(api)
					s.Hide(u)
					s.a.(*choices).tpl.off = tplOff
					s.Write(body)
					got := s.Result()
					if string(got.Response) != string(wantResp) || !reflect.DeepEqual(got.Tokens, want.Tokens) ||
						string(got.Usage) != string(want.Usage) || got.Err != want.Err || got.Done != want.Done {
						t.Fatalf("case %d chat=%v remove=%v template off=%v:\n%s\ngot  %s\n%+v\nwant %s\n%+v",
							n, chat, remove, tplOff, body, got.Response, got.Tokens, wantResp, want.Tokens)
					}
				}
			}
		}
	}
	if hidden < 2000 {
		t.Fatalf("only %d assemblies had a member to hide: the test no longer exercises Hide", hidden)
	}
}

// hideIn shows the unseen members of a plain assembly's response as the
// client saw them.
func hideIn(t *testing.T, resp []byte, u []Unseen) []byte {
	t.Helper()
	for _, f := range u {
		paths := []string{f.Name}
		if f.PerChoice {
			paths = nil
			for i := range gjson.GetBytes(resp, "choices.#").Int() {
				paths = append(paths, "choices."+strconv.FormatInt(i, 10)+"."+f.Name)
			}
		}
		for _, p := range paths {
			if !gjson.GetBytes(resp, p).Exists() {
				continue
			}
			var err error
			if f.Remove {
				resp, err = sjson.DeleteBytes(resp, p)
			} else {
				resp, err = sjson.SetRawBytes(resp, p, []byte("null"))
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	return resp
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
