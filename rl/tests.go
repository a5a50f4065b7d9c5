package rl

import (
	"regexp"
	"strconv"
	"strings"
)

// TestRun is what a test runner's output says: counts, the outcome of
// each named test, and where its summary is.
type TestRun struct {
	Runner         string // pytest, go, jest, vitest, cargo
	Passed, Failed int
	Cases          map[string]bool // test name -> passed
	Summary        Span            // the summary line, or the first test line
}

// A runner's per-test lines (name group 2, verdict group 1 or 3) and its
// summary line.
type runner struct {
	name    string
	cases   []*regexp.Regexp
	pass    func(verdict string) bool
	summary *regexp.Regexp
	counts  func(line string) (passed, failed int)
}

var countRe = regexp.MustCompile(`(\d+) (passed|failed|errors?)`)

// pytestCounts reads "1 failed, 2 passed, 1 error in 0.1s".
func pytestCounts(line string) (p, f int) {
	for _, m := range countRe.FindAllStringSubmatch(line, -1) {
		n, _ := strconv.Atoi(m[1])
		if m[2] == "passed" {
			p += n
		} else {
			f += n
		}
	}
	return p, f
}

var runners = []runner{
	{name: "pytest",
		cases: []*regexp.Regexp{
			regexp.MustCompile(`(?m)^(PASSED|FAILED|ERROR) (\S+::\S+)`),
			regexp.MustCompile(`(?m)^(\S+::\S+) (PASSED|FAILED|ERROR)`),
		},
		pass:    func(v string) bool { return v == "PASSED" },
		summary: regexp.MustCompile(`(?m)^=+ (?:.*\d+ (?:passed|failed|errors?).*|no tests ran.*) in [\d.]+s.*=+$`),
		counts:  pytestCounts},
	{name: "go",
		cases:   []*regexp.Regexp{regexp.MustCompile(`(?m)^\s*--- (PASS|FAIL): (\S+)`)},
		pass:    func(v string) bool { return v == "PASS" },
		summary: regexp.MustCompile(`(?m)^(?:ok|FAIL)[ \t]+\S+.*$|^FAIL$`)},
	{name: "cargo",
		cases:   []*regexp.Regexp{regexp.MustCompile(`(?m)^test (\S+) \.\.\. (ok|FAILED)$`)},
		pass:    func(v string) bool { return v == "ok" },
		summary: regexp.MustCompile(`(?m)^test result: (?:ok|FAILED)\. .*$`),
		counts:  pytestCounts},
	{name: "jest",
		cases:   []*regexp.Regexp{regexp.MustCompile(`(?m)^\s*(✓|✕|×|√) (.+?)(?: \(\d+ ?m?s\))?$`)},
		pass:    func(v string) bool { return v == "✓" || v == "√" },
		summary: regexp.MustCompile(`(?m)^\s*Tests:?\s+.*\d+ (?:passed|failed).*$`),
		counts:  pytestCounts},
}

// ParseTests reads the output of pytest (-rA summary lines, -v lines and
// the final "N failed, M passed in Xs" line), go test (--- PASS/FAIL and
// ok/FAIL package lines), cargo test (test x ... ok|FAILED and its test
// result line) and jest or vitest (✓/✕ lines and the Tests: line). It
// returns nil when text holds none of them.
func ParseTests(text string) *TestRun {
	for _, r := range runners {
		if tr := r.parse(text); tr != nil {
			return tr
		}
	}
	return nil
}

func (r *runner) parse(text string) *TestRun {
	tr := &TestRun{Runner: r.name, Cases: map[string]bool{}, Summary: Span{Start: -1}}
	for k, re := range r.cases {
		for _, m := range re.FindAllStringSubmatchIndex(text, -1) {
			verdict, name := text[m[2]:m[3]], text[m[4]:m[5]]
			if k == 1 && r.name == "pytest" {
				verdict, name = name, verdict
			}
			tr.Cases[name] = r.pass(verdict)
			if tr.Summary.Start < 0 {
				tr.Summary.Start, tr.Summary.End = m[0], m[1]
			}
		}
	}
	sm := r.summary.FindAllStringIndex(text, -1)
	if len(sm) == 0 && len(tr.Cases) == 0 {
		return nil
	}
	for _, ok := range tr.Cases {
		if ok {
			tr.Passed++
		} else {
			tr.Failed++
		}
	}
	if len(sm) > 0 {
		last := sm[len(sm)-1]
		tr.Summary.Start, tr.Summary.End = last[0], last[1]
		line := text[last[0]:last[1]]
		if r.counts != nil {
			tr.Passed, tr.Failed = r.counts(line)
		} else if strings.HasPrefix(line, "FAIL") && tr.Failed == 0 {
			tr.Failed = 1
		}
	}
	return tr
}
