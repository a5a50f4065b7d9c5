package score

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// fixed is the evaluation set: three tasks of three candidates, each with
// its outcome and the value the scripted scorers give it.
var fixed = []struct {
	id, task string
	reward   float64
	value    string
}{
	{"a", "t1", 0, "0.2"}, {"b", "t1", 1, "0.9"}, {"c", "t1", 0, "0.4"},
	{"d", "t2", 0, "0.7"}, {"e", "t2", 1, "0.6"}, {"f", "t2", 0, "0.1"},
	{"g", "t3", 0, "0.3"}, {"h", "t3", 0, "0.5"}, {"i", "t3", 0, "0.5"},
}

func fixedEpisodes() ([]*Episode, map[string]string) {
	var eps []*Episode
	values := map[string]string{}
	for _, f := range fixed {
		r := f.reward
		eps = append(eps, &Episode{ID: f.id, TaskID: f.task, Prompt: "solve " + f.task, Final: "answer-" + f.id, Status: "success", Reward: &r})
		values[f.id] = f.value
	}
	return eps, values
}

// wantChosen and wantReport are computed by hand in docs/rl-rollout.md's
// worked example: AUC 13/14, ECE 3.2/9.
var wantChosen = []string{"b", "d", "h"}

func checkReport(t *testing.T, choices []Choice) {
	t.Helper()
	var got []string
	for _, c := range choices {
		got = append(got, c.Chosen)
	}
	if !reflect.DeepEqual(got, wantChosen) {
		t.Errorf("chosen %v, want %v", got, wantChosen)
	}
	r := Evaluate(choices)
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if r.Tasks != 3 || r.Candidates != 9 || !near(r.PassAtN, 2.0/3) || !near(r.BestAtN, 1.0/3) || !near(r.RandomAtN, 2.0/9) ||
		r.AUC == nil || !near(*r.AUC, 13.0/14) || !near(r.ECE, 3.2/9) {
		b, _ := json.Marshal(r)
		t.Errorf("report %s; want tasks 3, candidates 9, pass@N 2/3, best@N 1/3, random@N 2/9, AUC 13/14, ECE 3.2/9", b)
	}
}

// scriptedScorer is a value-model server answering from values; a value
// starting with "!" is a fault: "!garbage", "!500", "!hang", "!nan".
func scriptedScorer(t *testing.T, values map[string]string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		c := gjson.GetBytes(body, "candidates.0")
		if r.Method != http.MethodPost || !gjson.GetBytes(body, "candidates.#").Exists() || c.Get("reward").Exists() {
			http.Error(w, "bad request "+string(body), http.StatusBadRequest)
			return
		}
		id := c.Get("episode_id").String()
		switch v := values[id]; v {
		case "!garbage":
			fmt.Fprint(w, "<html>oops</html>")
		case "!500":
			http.Error(w, "model not loaded", http.StatusInternalServerError)
		case "!hang":
			<-r.Context().Done()
		case "!nan":
			fmt.Fprintf(w, `{"scores":[{"episode_id":%q,"value":NaN}]}`, id)
		default:
			fmt.Fprintf(w, `{"scores":[{"episode_id":%q,"value":%s,"features":{"len":%d}}]}`, id, v, len(c.Get("final").String()))
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestRerankHTTP(t *testing.T) {
	eps, values := fixedEpisodes()
	srv := scriptedScorer(t, values)
	choices, err := Rerank(context.Background(), eps, RerankOptions{Scorer: NewHTTP(HTTPOptions{URL: srv.URL})})
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, choices)
	if f := choices[0].Candidates[0].Features; f["len"] != float64(len("answer-a")) {
		t.Errorf("features %v, want len 8", f)
	}
}

func TestRerankErrors(t *testing.T) {
	tests := []struct{ fault, want string }{
		{"!garbage", "candidate e: bad score: answer is not the scores JSON"},
		{"!500", "candidate e: scorer URL: status 500"},
		{"!hang", "candidate e: scorer URL: Post"},
		{"!nan", "candidate e: bad score: answer is not the scores JSON"},
		{"1.5", "candidate e: bad score: value 1.5 not in [0, 1]"},
	}
	for _, tt := range tests {
		t.Run(tt.fault, func(t *testing.T) {
			eps, values := fixedEpisodes()
			values["e"] = tt.fault
			srv := scriptedScorer(t, values)
			sc := NewHTTP(HTTPOptions{URL: srv.URL, Timeout: 200 * time.Millisecond})
			want := strings.ReplaceAll(tt.want, "URL", srv.URL)
			_, err := Rerank(context.Background(), eps, RerankOptions{Scorer: sc})
			if err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("stop: err %v, want prefix %q", err, want)
			}
			var failed []error
			choices, err := Rerank(context.Background(), eps, RerankOptions{Scorer: sc, OnError: OnErrorSkip, Failed: func(e error) { failed = append(failed, e) }})
			if err != nil || len(failed) != 1 || !strings.HasPrefix(failed[0].Error(), want) {
				t.Fatalf("skip: err %v, failed %v", err, failed)
			}
			// Without e, task t2's only success is gone: d is still chosen.
			if c := choices[1].Candidates[1]; c.Value != nil || c.Error == "" || choices[1].Chosen != "d" || len(choices) != 3 {
				t.Errorf("skip: t2 %+v", choices[1])
			}
		})
	}
}

// scriptedJudge is an OpenAI-compatible chat completions endpoint that
// answers with values[candidate], the candidate read from the user
// message's "answer-ID" line.
func scriptedJudge(t *testing.T, values map[string]string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req := gjson.ParseBytes(body)
		if r.URL.Path != "/v1/chat/completions" || req.Get("model").String() != "judge-1" || req.Get("temperature").Int() != 0 ||
			req.Get("messages.0.content").String() != JudgePrompt || req.Get("messages.1.role").String() != "user" {
			http.Error(w, `{"error":{"message":"unexpected request"}}`, http.StatusBadRequest)
			return
		}
		user := req.Get("messages.1.content").String()
		_, rest, _ := strings.Cut(user, "Final answer:\nanswer-")
		id, _, _ := strings.Cut(rest, "\n")
		content, _ := json.Marshal(values[id])
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1767225600,"model":"judge-1",`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":%s},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":40,"completion_tokens":2,"total_tokens":42}}`, content)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestRerankJudge(t *testing.T) {
	eps, values := fixedEpisodes()
	values["a"] = " 0.2\n"
	srv := scriptedJudge(t, values)
	j := NewJudge(JudgeOptions{BaseURL: srv.URL + "/v1/", Model: "judge-1"})
	choices, err := Rerank(context.Background(), eps, RerankOptions{Scorer: j})
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, choices)
	for _, bad := range []string{"Score: 0.8", "NaN", "0.8 because", "1.5", "-0", ""} {
		values["e"] = bad
		_, err := Rerank(context.Background(), eps, RerankOptions{Scorer: j})
		if !errors.Is(err, ErrBadScore) || !strings.HasPrefix(err.Error(), "candidate e: bad score: judge said") {
			t.Errorf("judge said %q: err %v, want a bad score naming candidate e", bad, err)
		}
	}
}

// TestRules drives the rules scorer through a fake totals source, as the
// rewards package's per-rule totals will.
func TestRules(t *testing.T) {
	totals := map[string]RuleTotals{"x": {"test_delta": 0.3, "masked_verification": -0.1}, "y": {}}
	r := NewRules(RulesOptions{Weights: map[string]float64{"masked_verification": 2},
		Totals: func(_ context.Context, ep *Episode) (RuleTotals, error) {
			tot, ok := totals[ep.ID]
			if !ok {
				return nil, errors.New("no rewards for episode")
			}
			return tot, nil
		}})
	got, err := r.Score(context.Background(), &Episode{ID: "x"})
	if want := 1 / (1 + math.Exp(-4*(0.3-0.2))); err != nil || math.Abs(got.Value-want) > 1e-12 || got.Features["test_delta"] != 0.3 {
		t.Errorf("Score(x) = %+v, %v; want %v", got, err, want)
	}
	if got, err := r.Score(context.Background(), &Episode{ID: "y"}); err != nil || got.Value != 0.5 {
		t.Errorf("Score(y) = %+v, %v; want 0.5", got, err)
	}
	if _, err := r.Score(context.Background(), &Episode{ID: "z"}); err == nil || err.Error() != "candidate z: rule totals: no rewards for episode" {
		t.Errorf("Score(z) err %v", err)
	}
}
