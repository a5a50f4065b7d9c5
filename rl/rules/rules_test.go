package rules

import (
	"errors"
	"strings"
	"testing"

	"github.com/orchard-rl/orchard/rl"
)

const (
	red2    = "FF\n=================================== FAILURES ===================================\nFAILED tests/test_calc.py::test_add - assert 3 == 4\nFAILED tests/test_calc.py::test_sub - assert 1 == 0\n========================= 2 failed in 0.05s ========================="
	red1    = "F.\nFAILED tests/test_calc.py::test_add - assert 3 == 4\n========================= 1 failed, 1 passed in 0.05s ========================="
	green   = "..\n========================= 2 passed in 0.04s ========================="
	pytest  = "python -m pytest -q tests/test_calc.py"
	srcFile = "src/calc.py"
)

type ruleCase struct {
	name  string
	rule  string
	steps []step
	fire  bool
	ev    string // the evidence text when it fires, when checked
}

func ruleCases() []ruleCase {
	ls := sh("ls src", "calc.py", 0)
	read, edit := step{read: srcFile}, step{edit: srcFile}
	return []ruleCase{
		{"malformed", "malformed-call", []step{{rawTool: "SHELL", raw: `{"cmd": "ls"`}}, true, `{"cmd": "ls"`},
		{"well-formed", "malformed-call", []step{{rawTool: "SHELL", raw: `{"cmd":"ls","command":"ls"}`}}, false, ""},
		{"unknown tool", "unknown-tool", []step{{rawTool: "run_terminal", raw: `{}`}}, true, `{}`},
		{"known tool", "unknown-tool", []step{ls}, false, ""},
		{"third identical call", "repeated-action", []step{ls, ls, ls}, true, ""},
		{"second identical call", "repeated-action", []step{ls, ls}, false, ""},
		{"rerun after red", "rerun-after-failure", []step{sh(pytest, red1, 1), sh(pytest, red1, 1)}, true, ""},
		{"rerun after another command", "rerun-after-failure", []step{sh(pytest, red1, 1), ls, sh(pytest, red1, 1)}, false, ""},
		{"timeout", "command-timeout", []step{{cmd: "sleep 600", out: "", timeout: true}}, true, "bash tool terminated command after exceeding timeout 120000 ms"},
		{"no timeout", "command-timeout", []step{sh("sleep 1", "", 0)}, false, ""},
		{"edit unread", "edit-unread-file", []step{edit}, true, ""},
		{"edit after read", "edit-unread-file", []step{read, edit}, false, ""},
		{"edit after listing", "edit-unread-file", []step{ls, edit}, false, ""},
		{"repro fixed", "repro-fixed", []step{sh(pytest, red1, 1), read, edit, sh(pytest, green, 0)}, true, "========================= 2 passed in 0.04s ========================="},
		{"repro still red", "repro-fixed", []step{sh(pytest, red1, 1), read, edit, sh(pytest, red1, 1)}, false, ""},
		{"fewer failing tests", "test-delta", []step{sh(pytest, red2, 1), sh(pytest, red1, 1)}, true, "========================= 1 failed, 1 passed in 0.05s ========================="},
		{"same failing tests", "test-delta", []step{sh(pytest, red1, 1), ls, sh(pytest, red1, 1)}, false, ""},
		{"suite after last edit", "regression-run", []step{read, edit, sh(pytest, green, 0)}, true, ""},
		{"suite before last edit", "regression-run", []step{sh(pytest, green, 0), read, edit}, false, ""},
		{"piped to head", "masked-verification-command", []step{sh(pytest+" | head -5", green, 0)}, true, "pytest -q tests/test_calc.py | head"},
		{"plain test run", "masked-verification-command", []step{sh(pytest, green, 0)}, false, ""},
		{"no pytest", "masked-verification-result", []step{sh(pytest, "/usr/bin/python: No module named pytest", 1)}, true, "No module named pytest"},
		{"pytest ran", "masked-verification-result", []step{sh(pytest, green, 0)}, false, ""},
		{"submit while red", "submit-while-red", []step{sh(pytest, red1, 1), {text: "Done."}}, true, "========================= 1 failed, 1 passed in 0.05s ========================="},
		{"submit while green", "submit-while-red", []step{sh(pytest, green, 0), {text: "Done."}}, false, ""},
		{"empty", "empty-completion", []step{{text: ""}}, true, ""},
		{"not empty", "empty-completion", []step{{text: "Done."}}, false, ""},
		{"cut at length", "finish-length", []step{{text: "partial", finish: "length"}}, true, "partial"},
		{"stopped", "finish-length", []step{{text: "Done.", finish: "stop"}}, false, ""},
	}
}

// TestDefaultRulesOnHarnesses runs every default rule, firing and near
// miss, on turns rendered as each of the four harnesses renders them.
func TestDefaultRulesOnHarnesses(t *testing.T) {
	c := Default()
	covered := map[string]bool{}
	for _, name := range []string{"codex", "opencode", "qwen-code", "claude-code"} {
		h := loadHarness(t, name)
		for _, tc := range ruleCases() {
			covered[tc.rule] = true
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				if tc.rule == "command-timeout" && h.timeout == "" {
					t.Skipf("%s: the fixture shows no timeout rendering", name)
				}
				turns, tr := h.facts(tc.steps)
				var hits []Hit
				for _, s := range c.Score(turns, nil) {
					for _, hit := range s.Hits {
						if hit.Rule == tc.rule {
							hits = append(hits, hit)
						}
					}
				}
				if got := len(hits) > 0; got != tc.fire {
					t.Fatalf("%s fired %v (%v), want %v; turns %+v", tc.rule, got, hits, tc.fire, turns)
				}
				if tc.fire && tc.ev != "" {
					e := hits[0].Evidence
					if got := rl.Text(&tr.Messages[e.MessageIndex])[e.Start:e.End]; got != tc.ev {
						t.Errorf("evidence %q, want %q", got, tc.ev)
					}
				}
			})
		}
	}
	for _, r := range c.Rules {
		if !covered[r.ID] {
			t.Errorf("default rule %s has no test case", r.ID)
		}
	}
}

// TestAntiHacking: what the model writes itself earns nothing.
func TestAntiHacking(t *testing.T) {
	c := Default()
	echoed := "==== 2 passed in 0.01s ===="
	cases := []struct {
		name  string
		steps []step
	}{
		{"claims in its message", []step{sh(pytest, red1, 1), {text: "All tests passed! " + green}}},
		{"echoes a summary", []step{sh(pytest, red1, 1), {read: srcFile}, {edit: srcFile}, sh(pytest+` ; echo "`+echoed+`"`, red1+"\n"+echoed, 0)}},
	}
	for _, name := range []string{"codex", "opencode", "qwen-code", "claude-code"} {
		h := loadHarness(t, name)
		for _, tc := range cases {
			turns, _ := h.facts(tc.steps)
			for i, s := range c.Score(turns, nil) {
				for _, hit := range s.Hits {
					if hit.Delta > 0 {
						t.Errorf("%s/%s: turn %d: %s fired %+v on the model's own text", name, tc.name, i, hit.Rule, hit)
					}
				}
			}
		}
	}
}

func TestScoreBounds(t *testing.T) {
	c := Default()
	h := loadHarness(t, "qwen-code")
	var steps []step
	for range 20 {
		steps = append(steps, step{rawTool: "nope", raw: `{`}) // malformed and unknown: -0.2 a turn
	}
	turns, _ := h.facts(steps)
	total := 0.0
	for _, s := range c.Score(turns, nil) {
		if s.Reward < -c.Clip || s.Reward > c.Clip {
			t.Fatalf("turn reward %v outside [-%v, %v]", s.Reward, c.Clip, c.Clip)
		}
		total += s.Reward
	}
	if total < -c.Beta-1e-12 {
		t.Errorf("episode process total %v, want >= -%v", total, c.Beta)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"unknown field", "rules:\n  - id: a\n    weight: -1\n    trigger: timeout\n    colour: red\n", `r.yaml:5: rule "a": unknown field "colour"`},
		{"unknown trigger", "rules:\n  - id: b\n    weight: -1\n    trigger: vibes\n", `r.yaml:4: rule "b": unknown trigger "vibes"`},
		{"bad regex", "rules:\n  - id: c\n    weight: -1\n    trigger: result_matches\n    pattern: '(x'\n", `r.yaml:5: rule "c": bad pattern`},
		{"positive on model text", "rules:\n  - id: d\n    weight: 1\n    trigger: command_matches\n    pattern: x\n", `r.yaml:2: rule "d": trigger command_matches reads what the model wrote`},
		{"unknown top field", "clip: 0.3\ngamma: 2\n", `r.yaml:2: unknown field "gamma"`},
		{"no weight", "rules:\n  - id: e\n    trigger: timeout\n", `r.yaml:2: rule "e": no weight`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("r.yaml", []byte(tt.yaml))
			var e *Error
			if !errors.As(err, &e) || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("Parse = %v, want an error starting %q", err, tt.want)
			}
		})
	}
}

func TestOutcomeOverride(t *testing.T) {
	c, err := Parse("r.yaml", []byte("outcome:\n  failure: -0.5\n  error: 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Outcome["failure"] != -0.5 || c.Outcome["success"] != 1 || c.Outcome["error"] != 0 {
		t.Errorf("outcome %v, want failure -0.5 over the defaults", c.Outcome)
	}
}
