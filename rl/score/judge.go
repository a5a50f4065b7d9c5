package score

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// JudgePrompt is the judge's fixed system prompt. The user message is the
// task and the final answer, laid out by [JudgeUserMessage].
const JudgePrompt = `You grade the final answer of a coding agent to a task.
Reply with one number between 0 and 1 and nothing else: your probability that the task was solved.`

// JudgeUserMessage is the judge's user message for ep.
func JudgeUserMessage(ep *Episode) string {
	return "Task:\n" + ep.Prompt + "\n\nFinal answer:\n" + ep.Final + "\n\nProbability solved:"
}

// JudgeOptions configures [NewJudge].
type JudgeOptions struct {
	BaseURL string        // OpenAI-compatible base URL, e.g. http://host:8000/v1; required
	Model   string        // required
	APIKey  string        // bearer token when set
	Timeout time.Duration // per candidate; default 60s
	Client  *http.Client
}

// Judge asks a chat model for the probability that a candidate solved
// its task, with temperature 0 and at most 8 new tokens. The answer's
// content, trimmed of white space, must be a decimal number in [0, 1]
// ("0", "1", "0.85", "1.0"); anything else is an error naming the
// candidate.
type Judge struct {
	o JudgeOptions
}

// NewJudge returns a judge scorer.
func NewJudge(o JudgeOptions) *Judge {
	o.defaults()
	return &Judge{o: o}
}

// defaults fills the zero fields of o and trims BaseURL's trailing slash.
func (o *JudgeOptions) defaults() {
	if o.Timeout == 0 {
		o.Timeout = 60 * time.Second
	}
	if o.Client == nil {
		o.Client = &http.Client{}
	}
	o.BaseURL = strings.TrimSuffix(o.BaseURL, "/")
}

// judgeAnswer is the strict grammar of a judge's answer.
var judgeAnswer = regexp.MustCompile(`^(0(\.[0-9]+)?|1(\.0+)?|\.[0-9]+)$`)

// Score asks the judge about ep.
func (j *Judge) Score(ctx context.Context, ep *Episode) (Score, error) {
	body, _ := json.Marshal(map[string]any{ // strings and numbers always marshal
		"model": j.o.Model, "temperature": 0, "max_tokens": 8,
		"messages": []map[string]string{{"role": "system", "content": JudgePrompt}, {"role": "user", "content": JudgeUserMessage(ep)}},
	})
	raw, err := post(ctx, j.o.Client, j.o.BaseURL+"/chat/completions", j.o.APIKey, j.o.Timeout, body)
	if err != nil {
		return Score{}, fmt.Errorf("candidate %s: judge %s: %w", ep.ID, j.o.BaseURL, err)
	}
	var a struct {
		Choices []struct {
			Message struct {
				Content *string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(raw, &a); err != nil || len(a.Choices) == 0 || a.Choices[0].Message.Content == nil {
		return Score{}, fmt.Errorf("candidate %s: %w: judge answer is not a chat completion with content: %.200q", ep.ID, ErrBadScore, raw)
	}
	text := strings.TrimSpace(*a.Choices[0].Message.Content)
	if !judgeAnswer.MatchString(text) {
		return Score{}, fmt.Errorf("candidate %s: %w: judge said %.80q, want a number in [0, 1]", ep.ID, ErrBadScore, text)
	}
	v, _ := strconv.ParseFloat(text, 64) // the grammar only admits numbers
	return check(ep, Score{Value: v})
}
