package rules

import (
	"math"
	"path"
	"strings"

	"github.com/orchard-rl/orchard/rl"
)

// Hit is one firing of a rule on a turn.
type Hit struct {
	Rule     string
	Class    Class
	Delta    float64
	Evidence rl.Span
}

// Scored is the process reward of one turn: the rules that fired, and
// Reward, their sum clipped to [-Clip, Clip] and scaled with the rest of
// the episode to a total |reward| of at most Beta.
type Scored struct {
	Hits   []Hit
	Reward float64
}

// episode is the running state of one episode's scoring.
type episode struct {
	c         *Config
	fired     map[string]bool     // positive rules that fired (once per episode)
	actions   map[string]int      // identical calls so far
	seenFiles map[string][]string // read files by base name
	seenDirs  map[string][]string // listed directories by base name
	lastCmd   string
	lastFail  bool
	edited    bool
	lastEdit  int             // turn of the episode's last edit; -1 for none
	failedPre map[string]bool // commands that failed before the first edit
	testFails map[string]int  // command -> failing count of its last run
	lastTests *rl.TestRun     // the last test run
	lastRun   rl.Span         // where it is
	ops       int             // work counted, for tests of linear growth
	out       []Scored        // per turn
}

// Score scores the turns of one episode, in order. ops, when not nil, is
// increased by the work done.
func (c *Config) Score(turns []rl.Turn, ops *int) []Scored {
	e := &episode{c: c, fired: map[string]bool{}, actions: map[string]int{}, lastEdit: -1,
		failedPre: map[string]bool{}, seenFiles: map[string][]string{}, seenDirs: map[string][]string{}, testFails: map[string]int{}, out: make([]Scored, len(turns))}
	for i := range turns {
		for _, call := range turns[i].Calls {
			if len(call.Edits) > 0 {
				e.lastEdit = i
			}
		}
	}
	for i := range turns {
		e.turn(turns, i)
	}
	e.finish()
	if ops != nil {
		*ops += e.ops
	}
	return e.out
}

func (e *episode) turn(turns []rl.Turn, i int) {
	t := &turns[i]
	for _, r := range e.c.Rules {
		e.ops++
		switch r.Trigger {
		case EmptyCompletion:
			if t.Empty && t.MessageIndex >= 0 {
				e.hit(i, r, r.Weight, rl.Span{MessageIndex: t.MessageIndex})
			}
		case FinishLength:
			if t.Finish == "length" && t.MessageIndex >= 0 {
				e.hit(i, r, r.Weight, rl.Span{MessageIndex: t.MessageIndex, End: len(t.Text)})
			}
		case SubmitRed:
			if i == len(turns)-1 && len(t.Calls) == 0 && e.lastTests != nil && e.lastTests.Failed > 0 {
				e.hit(i, r, r.Weight, e.lastRun)
			}
		}
	}
	for k := range t.Calls {
		e.call(t, i, &t.Calls[k])
	}
}

// call applies the call rules, then updates the state with what it did.
func (e *episode) call(t *rl.Turn, i int, c *rl.Call) {
	key := c.Name + "\x00" + c.Arguments
	e.actions[key]++
	for _, r := range e.c.Rules {
		e.ops++
		if d, sp, ok := e.fires(r, i, c, key); ok {
			e.hit(i, r, d, sp)
		}
	}
	e.update(i, c)
}

// fires reports whether rule r fires on call c, with its delta and
// evidence.
func (e *episode) fires(r Rule, i int, c *rl.Call, key string) (float64, rl.Span, bool) {
	res := c.Result
	switch r.Trigger {
	case MalformedCall:
		return r.Weight, c.Args, !c.ValidJSON
	case UnknownTool:
		return r.Weight, c.Args, c.Unknown
	case RepeatedAction:
		k := r.K
		if k == 0 {
			k = 3
		}
		return r.Weight, c.Args, e.actions[key] >= k
	case RerunAfterFailure:
		return r.Weight, c.Args, c.Command != "" && c.Command == e.lastCmd && e.lastFail
	case EditUnread:
		return r.Weight, c.Args, e.unread(c.Edits)
	case CommandMatches:
		if m := r.Pattern.FindStringIndex(c.Command); m != nil {
			return r.Weight, commandSpan(c, m), true
		}
	case Timeout:
		if res != nil && res.TimedOut {
			return r.Weight, res.Timeout, true
		}
	case ResultMatches:
		if res != nil {
			if m := r.Pattern.FindStringIndex(res.Text); m != nil {
				return r.Weight, rl.Span{MessageIndex: res.MessageIndex, Start: m[0], End: m[1]}, e.fromEnv(c, res.Text[m[0]:m[1]])
			}
		}
	default:
		return e.testRules(r, i, c)
	}
	return 0, rl.Span{}, false
}

// testRules are the rules over test runs and repaired reproductions.
func (e *episode) testRules(r Rule, i int, c *rl.Call) (float64, rl.Span, bool) {
	res := c.Result
	if res == nil || c.Command == "" {
		return 0, rl.Span{}, false
	}
	tests := e.tests(c)
	switch r.Trigger {
	case ReproFixed:
		if e.edited && e.failedPre[c.Command] && passed(res, tests) {
			return r.Weight, passSpan(res, tests), e.fromEnv(c, spanText(res, passSpan(res, tests)))
		}
	case TestDelta:
		prev, ok := e.testFails[c.Command]
		if tests != nil && ok && prev != tests.Failed {
			d := r.Weight * float64(prev-tests.Failed) / float64(max(prev, tests.Failed))
			return d, tests.Summary, e.fromEnv(c, spanText(res, tests.Summary))
		}
	case RegressionRun:
		if tests != nil && e.lastEdit >= 0 && i > e.lastEdit && tests.Passed+tests.Failed > 0 {
			return r.Weight, tests.Summary, e.fromEnv(c, spanText(res, tests.Summary))
		}
	}
	return 0, rl.Span{}, false
}

// tests returns the call's test run: only a test command's output counts.
func (e *episode) tests(c *rl.Call) *rl.TestRun {
	if c.Result == nil || c.Result.Tests == nil || !c.TestCommand {
		return nil
	}
	tr := *c.Result.Tests
	tr.Summary.MessageIndex = c.Result.MessageIndex
	return &tr
}

// fromEnv reports whether evidence text is the environment's own: text the
// model wrote into its call (echo "5 passed") does not count.
func (e *episode) fromEnv(c *rl.Call, text string) bool {
	text = strings.TrimSpace(text)
	return text != "" && !strings.Contains(c.Arguments, text)
}

// update records what call c did.
func (e *episode) update(i int, c *rl.Call) {
	for _, f := range c.Reads {
		e.seenFiles[path.Base(f)] = append(e.seenFiles[path.Base(f)], f)
	}
	for _, d := range c.Lists {
		e.seenDirs[path.Base(d)] = append(e.seenDirs[path.Base(d)], d)
	}
	if len(c.Edits) > 0 {
		e.edited = true
	}
	if c.Command == "" {
		return
	}
	failed := c.Result.Failed()
	e.lastCmd, e.lastFail = c.Command, failed
	if failed && !e.edited {
		e.failedPre[c.Command] = true
	}
	if tr := e.tests(c); tr != nil {
		e.testFails[c.Command] = tr.Failed
		e.lastTests, e.lastRun = tr, tr.Summary
	}
}

// unread reports whether any of the edited files was never read, nor in
// a listed directory.
func (e *episode) unread(edits []string) bool {
	for _, f := range edits {
		if !e.seen(f) {
			return true
		}
	}
	return false
}

func (e *episode) seen(f string) bool {
	for _, s := range e.seenFiles[path.Base(f)] {
		e.ops++
		if rl.SamePath(f, s) {
			return true
		}
	}
	for _, d := range e.seenDirs[path.Base(path.Dir(f))] {
		e.ops++
		if rl.Under(f, d) {
			return true
		}
	}
	return false
}

// hit records a firing; a positive rule fires once per episode, except
// test_delta.
func (e *episode) hit(i int, r Rule, delta float64, sp rl.Span) {
	if delta > 0 && r.Trigger != TestDelta {
		if e.fired[r.ID] {
			return
		}
		e.fired[r.ID] = true
	}
	cl := r.Class
	if cl == "" {
		cl = ClassWaste
		if delta > 0 {
			cl = ClassProgress
		} else if r.Trigger == TestDelta {
			cl = ClassRegression
		}
	}
	e.out[i].Hits = append(e.out[i].Hits, Hit{Rule: r.ID, Class: cl, Delta: delta, Evidence: sp})
}

// finish clips each turn's reward and scales the episode's total.
func (e *episode) finish() {
	total := 0.0
	for i := range e.out {
		s := 0.0
		for _, h := range e.out[i].Hits {
			s += h.Delta
		}
		e.out[i].Reward = math.Max(-e.c.Clip, math.Min(e.c.Clip, s))
		total += math.Abs(e.out[i].Reward)
	}
	if total > e.c.Beta && total > 0 {
		f := e.c.Beta / total
		for i := range e.out {
			e.out[i].Reward *= f
		}
	}
}

func passed(r *rl.Result, tests *rl.TestRun) bool {
	if tests != nil {
		return tests.Failed == 0 && tests.Passed > 0
	}
	return r.ExitCode != nil && *r.ExitCode == 0 && !r.TimedOut
}

func passSpan(r *rl.Result, tests *rl.TestRun) rl.Span {
	if tests != nil {
		return tests.Summary
	}
	return r.Exit
}

func spanText(r *rl.Result, sp rl.Span) string {
	if sp.Start < 0 || sp.End > len(r.Text) || sp.Start > sp.End {
		return ""
	}
	return r.Text[sp.Start:sp.End]
}

// commandSpan maps a match in a call's command to the call's arguments
// (where the command is JSON-escaped); the whole arguments when it cannot.
func commandSpan(c *rl.Call, m []int) rl.Span {
	frag := c.Command[m[0]:m[1]]
	if k := strings.Index(c.Arguments, frag); k >= 0 {
		return rl.Span{MessageIndex: c.Args.MessageIndex, Start: c.Args.Start + k, End: c.Args.Start + k + len(frag)}
	}
	return c.Args
}
