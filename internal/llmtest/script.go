package llmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Profiles select which server's dialect of the OpenAI-style APIs a script
// speaks (Anthropic messages and the Responses API have one dialect each).
const (
	ProfileVLLM   = "vllm"   // vLLM: "reasoning", return_token_ids, no usage:null chunks
	ProfileOpenAI = "openai" // OpenAI: usage:null on every chunk with include_usage, no reasoning text
	ProfileSGLang = "sglang" // SGLang: "reasoning_content", per-choice ids (non-streaming only)
)

// Script is one scripted model, loaded from testdata/llm/NAME.json and chosen
// by a request whose "model" is NAME. Its turns answer successive agent turns:
// turn k answers a request whose history holds k assistant turns (or the turn
// named by the X-Llmtest-Turn header); requests past the end get the last turn.
type Script struct {
	Name    string `json:"-"`
	Profile string `json:"profile,omitempty"` // vllm (default), openai or sglang
	// Model is reported in responses; "" reports the request's model.
	Model string `json:"model,omitempty"`
	// Created is the fixed unix time reported in responses (default 1767225600).
	Created int64 `json:"created,omitempty"`
	// Fault is a default fault spec, same syntax as the X-Llmtest-Fault header.
	Fault string `json:"fault,omitempty"`
	Turns []Turn `json:"turns"`
}

// Turn is one generation. Its inline Choice fields are choice 0; Choices, when
// set, replaces them (choice i of an n>1 request is Choices[i % len]).
type Turn struct {
	// PromptTokenIDs is what the engine reports as the prompt's ids (default:
	// 5+3k ids counting up from 1000 for turn k).
	PromptTokenIDs []int64   `json:"prompt_token_ids,omitempty"`
	Choices        []*Choice `json:"choices,omitempty"`
	Choice
}

// Choice is one completion. Each piece of text (an element of a Pieces list)
// is one token and one stream delta, emitted in this order: reasoning,
// content, then each tool call's arguments. TokenIDs and Logprobs, when given,
// hold one entry per piece in that order; otherwise they are generated.
type Choice struct {
	Reasoning Pieces `json:"reasoning,omitempty"`
	// EncryptedReasoning is the Responses API reasoning item's
	// encrypted_content and the Anthropic thinking block's signature.
	EncryptedReasoning string `json:"encrypted_reasoning,omitempty"`
	// RedactedThinking adds Anthropic redacted_thinking blocks (their data)
	// before the thinking block.
	RedactedThinking []string   `json:"redacted_thinking,omitempty"`
	Content          Pieces     `json:"content,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
	// FinishReason is "stop" (default, or "tool_calls" when there are tool
	// calls) or "length"; it is mapped to each API's vocabulary.
	FinishReason string    `json:"finish_reason,omitempty"`
	TokenIDs     []int64   `json:"token_ids,omitempty"`
	Logprobs     []float64 `json:"logprobs,omitempty"`
}

// ToolCall is one function call; several in a choice are parallel calls.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments Pieces `json:"arguments"` // JSON text of an object, in pieces
}

// Pieces is text split into stream deltas: a JSON string (one piece) or an
// array of strings.
type Pieces []string

// UnmarshalJSON accepts a string or an array of strings.
func (p *Pieces) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*p = Pieces{s}
		return nil
	}
	var ss []string
	if err := json.Unmarshal(b, &ss); err != nil {
		return fmt.Errorf("pieces: want a string or an array of strings: %w", err)
	}
	*p = ss
	return nil
}

// Text is the pieces joined.
func (p Pieces) Text() string { return strings.Join(p, "") }

// Token kinds: which part of the output a token belongs to.
const (
	kindReasoning = -2
	kindContent   = -1
	// kinds >= 0 are the index of a tool call's arguments
)

// token is one generated piece with its engine id and logprob.
type token struct {
	kind    int
	text    string
	id      int64
	logprob float64
}

// tokens lays the choice out as tokens in emission order. choice is the
// choice index, used to keep generated ids distinct across choices.
func (c *Choice) tokens(choice int) []token {
	var out []token
	add := func(kind int, ps Pieces) {
		for _, p := range ps {
			out = append(out, token{kind: kind, text: p})
		}
	}
	add(kindReasoning, c.Reasoning)
	add(kindContent, c.Content)
	for i, tc := range c.ToolCalls {
		add(i, tc.Arguments)
	}
	for i := range out {
		out[i].id = int64(20000 + 1000*choice + i)
		if i < len(c.TokenIDs) {
			out[i].id = c.TokenIDs[i]
		}
		// Multiples of 1/8 print the same in every JSON encoder.
		out[i].logprob = -float64(i%7+1) * 0.125
		if i < len(c.Logprobs) {
			out[i].logprob = c.Logprobs[i]
		}
	}
	return out
}

func (c *Choice) finish() string {
	switch {
	case c.FinishReason != "":
		return c.FinishReason
	case len(c.ToolCalls) > 0:
		return "tool_calls"
	}
	return "stop"
}

// choice returns choice i of the turn.
func (t *Turn) choice(i int) *Choice {
	if len(t.Choices) == 0 {
		return &t.Choice
	}
	return t.Choices[i%len(t.Choices)]
}

// promptIDs returns the turn's prompt ids (generated for turn k if unset).
func (t *Turn) promptIDs(k int) []int64 {
	if t.PromptTokenIDs != nil {
		return t.PromptTokenIDs
	}
	ids := make([]int64, 5+3*k)
	for i := range ids {
		ids[i] = int64(1000 + i)
	}
	return ids
}

// validate checks what would otherwise produce a malformed response.
func (s *Script) validate() error {
	switch s.Profile {
	case "", ProfileVLLM, ProfileOpenAI, ProfileSGLang:
	default:
		return fmt.Errorf("unknown profile %q", s.Profile)
	}
	if len(s.Turns) == 0 {
		return fmt.Errorf("no turns")
	}
	if _, err := parseFault(s.Fault); err != nil {
		return err
	}
	for k := range s.Turns {
		t := &s.Turns[k]
		for i := 0; i < max(1, len(t.Choices)); i++ {
			if err := t.choice(i).validate(); err != nil {
				return fmt.Errorf("turn %d choice %d: %w", k, i, err)
			}
		}
	}
	return nil
}

func (c *Choice) validate() error {
	n := len(c.tokens(0))
	if c.TokenIDs != nil && len(c.TokenIDs) != n {
		return fmt.Errorf("%d token_ids for %d pieces", len(c.TokenIDs), n)
	}
	if c.Logprobs != nil && len(c.Logprobs) != n {
		return fmt.Errorf("%d logprobs for %d pieces", len(c.Logprobs), n)
	}
	for _, tc := range c.ToolCalls {
		if tc.ID == "" || tc.Name == "" {
			return fmt.Errorf("tool call needs id and name")
		}
		if a := tc.Arguments.Text(); !json.Valid([]byte(a)) || !strings.HasPrefix(strings.TrimSpace(a), "{") {
			return fmt.Errorf("tool call %s: arguments %q are not a JSON object", tc.ID, a)
		}
	}
	return nil
}

// LoadScripts reads every *.json file of dir as a [Script] named after the
// file (without .json).
func LoadScripts(dir string) (map[string]*Script, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, fmt.Errorf("list scripts in %s: %w", dir, err)
	}
	out := make(map[string]*Script, len(paths))
	for _, p := range paths {
		s, err := ParseScript(p)
		if err != nil {
			return nil, err
		}
		out[s.Name] = s
	}
	return out, nil
}

// ParseScript reads and validates one script file.
func ParseScript(path string) (*Script, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read script: %w", err)
	}
	var s Script
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("parse script %s: %w", path, err)
	}
	s.Name = strings.TrimSuffix(filepath.Base(path), ".json")
	if err := s.validate(); err != nil {
		return nil, fmt.Errorf("script %s: %w", path, err)
	}
	return &s, nil
}

// DefaultScriptsDir returns testdata/llm of the module that contains the
// working directory, found by walking up to go.mod, so tests of any package
// can use the shared scripts.
func DefaultScriptsDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find scripts: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "testdata", "llm"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("find scripts: no go.mod above the working directory")
		}
		dir = parent
	}
}
