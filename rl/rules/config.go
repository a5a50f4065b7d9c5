package rules

import (
	_ "embed"
	"fmt"
	"math"
	"os"
	"regexp"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// Trigger names a detector over turn facts.
type Trigger string

// Triggers. Those marked (env) read tool results; the others read what
// the model generated and may only carry negative weights.
const (
	MalformedCall     Trigger = "malformed_call"      // tool-call arguments are not a JSON object
	UnknownTool       Trigger = "unknown_tool"        // a call to a tool the request did not list
	RepeatedAction    Trigger = "repeated_action"     // the k-th identical call (name and arguments) of the episode
	RerunAfterFailure Trigger = "rerun_after_failure" // the same command as the previous one, which failed
	Timeout           Trigger = "timeout"             // (env) the harness reports a command timeout
	EditUnread        Trigger = "edit_unread"         // an edit of a file never read nor listed before
	ReproFixed        Trigger = "repro_fixed"         // (env) a command that failed before the first edit passes after one
	TestDelta         Trigger = "test_delta"          // (env) the failing count of a re-run test command changed
	RegressionRun     Trigger = "regression_run"      // (env) a test run after the episode's last edit
	CommandMatches    Trigger = "command_matches"     // a shell command matches pattern
	ResultMatches     Trigger = "result_matches"      // (env) a tool result matches pattern
	SubmitRed         Trigger = "submit_red"          // the final turn, while the last test run had failures
	EmptyCompletion   Trigger = "empty_completion"    // no text and no tool calls
	FinishLength      Trigger = "finish_length"       // the completion stopped at its token limit
)

// envTriggers read only what the environment produced.
var envTriggers = map[Trigger]bool{Timeout: true, ReproFixed: true, TestDelta: true, RegressionRun: true, ResultMatches: true}

var knownTriggers = map[Trigger]bool{MalformedCall: true, UnknownTool: true, RepeatedAction: true, RerunAfterFailure: true,
	Timeout: true, EditUnread: true, ReproFixed: true, TestDelta: true, RegressionRun: true, CommandMatches: true,
	ResultMatches: true, SubmitRed: true, EmptyCompletion: true, FinishLength: true}

// Class groups rules for credit-assignment SFT (see rl/rewards).
type Class string

// Classes; a rule without one is progress when its weight is positive
// and waste otherwise (test_delta is progress or regression by sign).
const (
	ClassProgress   Class = "progress"
	ClassRegression Class = "regression"
	ClassWaste      Class = "waste"
	ClassMasking    Class = "masking"
)

// Rule is one entry of a rules file.
type Rule struct {
	ID      string         `json:"id"`
	Weight  float64        `json:"weight"`
	Trigger Trigger        `json:"trigger"`
	Pattern *regexp.Regexp `json:"-"`
	Source  string         `json:"pattern,omitempty"` // Pattern's text
	K       int            `json:"k,omitempty"`       // repeated_action: the count that fires (default 3)
	Class   Class          `json:"class,omitempty"`
	Line    int            `json:"-"`
}

// Config is a parsed rules file.
type Config struct {
	File    string             `json:"-"`
	Clip    float64            `json:"clip"`    // per-turn |process reward| bound (default 0.3)
	Beta    float64            `json:"beta"`    // episode total |process reward| bound (default 0.5)
	Outcome map[string]float64 `json:"outcome"` // episode status -> outcome reward
	Rules   []Rule             `json:"rules"`
}

//go:embed default.yaml
var defaultYAML []byte

// DefaultFile is the name errors and hashes give the embedded rules.
const DefaultFile = "default"

// Default returns the embedded default rules.
func Default() *Config {
	c, err := Parse(DefaultFile, defaultYAML)
	if err != nil {
		panic(err) // the embedded file is tested
	}
	return c
}

// DefaultOutcome is the outcome map every file starts from; its own
// outcome entries win.
func DefaultOutcome() map[string]float64 {
	return map[string]float64{"success": 1, "failure": -1, "timeout": -1}
}

// Load reads a rules file; name "default" or "" is the embedded set.
func Load(name string) (*Config, error) {
	if name == "" || name == DefaultFile {
		return Default(), nil
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("read rules: %w", err)
	}
	return Parse(name, b)
}

// Error is a problem in a rules file, at a line, in a rule when Rule is
// set.
type Error struct {
	File string
	Line int
	Rule string
	Msg  string
}

func (e *Error) Error() string {
	if e.Rule != "" {
		return fmt.Sprintf("%s:%d: rule %q: %s", e.File, e.Line, e.Rule, e.Msg)
	}
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}

// Parse reads a rules file's bytes; name is used in errors.
func Parse(name string, b []byte) (*Config, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	c := &Config{File: name, Clip: 0.3, Beta: 0.5, Outcome: DefaultOutcome()}
	if len(doc.Content) == 0 {
		return c, nil
	}
	p := parser{file: name}
	if err := p.top(c, doc.Content[0]); err != nil {
		return nil, err
	}
	return c, nil
}

type parser struct{ file string }

func (p parser) errf(n *yaml.Node, rule, format string, args ...any) error {
	return &Error{File: p.file, Line: n.Line, Rule: rule, Msg: fmt.Sprintf(format, args...)}
}

func (p parser) top(c *Config, n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return p.errf(n, "", "want a mapping with clip, beta, outcome and rules")
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		var err error
		switch k.Value {
		case "clip":
			c.Clip, err = p.number(v, "", 0, math.MaxFloat64)
		case "beta":
			c.Beta, err = p.number(v, "", 0, math.MaxFloat64)
		case "outcome":
			err = p.outcome(c, v)
		case "rules":
			err = p.rules(c, v)
		default:
			err = p.errf(k, "", "unknown field %q (want clip, beta, outcome or rules)", k.Value)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (p parser) number(v *yaml.Node, rule string, lo, hi float64) (float64, error) {
	f, err := strconv.ParseFloat(v.Value, 64)
	if v.Kind != yaml.ScalarNode || err != nil || math.IsNaN(f) || f < lo || f > hi {
		return 0, p.errf(v, rule, "%q is not a number in [%g, %g]", v.Value, lo, hi)
	}
	return f, nil
}

func (p parser) outcome(c *Config, n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return p.errf(n, "", "outcome: want a mapping of episode status to reward")
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		f, err := p.number(n.Content[i+1], "", -math.MaxFloat64, math.MaxFloat64)
		if err != nil {
			return err
		}
		c.Outcome[n.Content[i].Value] = f
	}
	return nil
}

func (p parser) rules(c *Config, n *yaml.Node) error {
	if n.Kind != yaml.SequenceNode {
		return p.errf(n, "", "rules: want a list")
	}
	seen := map[string]bool{}
	for _, rn := range n.Content {
		r, err := p.rule(rn)
		if err != nil {
			return err
		}
		if seen[r.ID] {
			return p.errf(rn, r.ID, "duplicate id")
		}
		seen[r.ID] = true
		c.Rules = append(c.Rules, r)
	}
	return nil
}
