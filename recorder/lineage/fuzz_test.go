package lineage

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/orchard-rl/orchard/recorder"
)

// script turns fuzz bytes into token-only calls that extend, retry, branch
// from or ignore earlier calls, over a small alphabet so that unrelated
// sequences share prefixes often, and long enough to cross checkpoints.
type script struct {
	b []byte
	i int
}

func (s *script) next() int {
	if s.i >= len(s.b) {
		return 0
	}
	s.i++
	return int(s.b[s.i-1])
}

func (s *script) ids(n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(s.next() % 5)
	}
	return out
}

func (s *script) calls() []*recorder.Call {
	var calls []*recorder.Call
	full := func(c *recorder.Call) []int32 { return slices.Concat(c.Tokens.PromptIDs, c.Tokens.CompletionIDs) }
	for s.i < len(s.b) && len(calls) < 40 {
		op, n := s.next()%6, s.next()%3*70+s.next()%8
		var p []int32
		var earlier *recorder.Call
		if len(calls) > 0 {
			earlier = calls[s.next()%len(calls)]
		}
		switch {
		case earlier == nil || op == 0:
			p = s.ids(1 + n)
		case op == 1:
			p = slices.Clone(earlier.Tokens.PromptIDs)
		case op == 2:
			p = full(calls[len(calls)-1])
		case op == 3:
			p = slices.Concat(full(earlier), s.ids(n))
		case op == 4:
			ep := earlier.Tokens.PromptIDs
			p = slices.Concat(ep[:s.next()%(len(ep)+1)], s.ids(1+n))
		default:
			p = slices.Concat(full(calls[len(calls)-1]), s.ids(n))
		}
		if len(p) == 0 {
			p = []int32{7}
		}
		p = p[:min(len(p), 1500)]
		calls = append(calls, tokCall(fmt.Sprintf("c%d", len(calls)), p, s.ids(s.next()%20)))
	}
	return calls
}

func commonPrefix(a, b []int32) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// FuzzTokenLineage checks the hash-chain classifier against brute force:
// retries and extensions are found exactly, common prefixes are exact,
// threads are numbered consistently, and Observe agrees with Classify.
func FuzzTokenLineage(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
	f.Add([]byte("extend extend retry fork branch compact edit and then some more bytes to go on"))
	f.Add(slices.Repeat([]byte{5, 2, 0, 3}, 200))
	f.Fuzz(func(t *testing.T, data []byte) {
		calls := (&script{b: data}).calls()
		got := Classify(calls)
		c := checker{calls: calls, got: got, byID: map[string]int{}}
		for _, call := range calls {
			c.fulls = append(c.fulls, slices.Concat(call.Tokens.PromptIDs, call.Tokens.CompletionIDs))
		}
		for i := range calls {
			c.check(t, i)
		}
		tr := NewTracker(Options{})
		for i, call := range calls {
			if l, _ := tr.Observe(call); l != got[i] {
				t.Fatalf("%s: Observe = %+v, Classify = %+v", call.CallID, l, got[i])
			}
		}
	})
}

// checker holds a fuzzed episode, its classification, and brute-force
// facts about it.
type checker struct {
	calls   []*recorder.Call
	got     []recorder.Lineage
	fulls   [][]int32
	byID    map[string]int
	threads int
}

func (c *checker) check(t *testing.T, i int) {
	t.Helper()
	call, l := c.calls[i], c.got[i]
	c.byID[call.CallID] = i
	p := call.Tokens.PromptIDs
	if i == 0 {
		if l.Kind != recorder.LineageRoot || l.ParentCallID != "" || l.Thread != 0 {
			t.Fatalf("call 0: %+v, want root of thread 0", l)
		}
		c.threads = 1
		return
	}
	pi, ok := c.byID[l.ParentCallID]
	if !ok || pi >= i {
		t.Fatalf("%s: parent %q is not an earlier call", call.CallID, l.ParentCallID)
	}
	pf := c.fulls[pi]
	if want := commonPrefix(p, pf); l.CommonPrefixTokens != want {
		t.Fatalf("%s: CommonPrefixTokens = %d, want %d", call.CallID, l.CommonPrefixTokens, want)
	}
	checkThread(t, call.CallID, l, c.got[pi].Thread, &c.threads)
	retry, ext := -1, 0
	for j := range i {
		if slices.Equal(c.calls[j].Tokens.PromptIDs, p) {
			retry = j
		}
		if f := c.fulls[j]; len(f) <= len(p) && slices.Equal(f, p[:len(f)]) {
			ext = max(ext, len(f))
		}
	}
	switch {
	case retry >= 0:
		if l.Kind != recorder.LineageRetry || !slices.Equal(c.calls[pi].Tokens.PromptIDs, p) {
			t.Fatalf("%s: %+v, want a retry of a call with the same prompt", call.CallID, l)
		}
	case ext > 0:
		if (l.Kind != recorder.LineageExtend && l.Kind != recorder.LineageFork) || len(pf) != ext {
			t.Fatalf("%s: %+v, want extend or fork of a call %d ids long", call.CallID, l, ext)
		}
		if slices.Equal(p, c.fulls[i-1]) && l.Kind != recorder.LineageExtend {
			t.Fatalf("%s: prompt is the previous call's prompt+completion, got %+v", call.CallID, l)
		}
	default:
		switch l.Kind {
		case recorder.LineageCompacted, recorder.LineageFork, recorder.LineageEdited:
		default:
			t.Fatalf("%s: kind %s for a prompt that repeats and extends nothing", call.CallID, l.Kind)
		}
	}
}

// checkThread: a fork opens the next thread number, anything else stays in
// its parent's thread.
func checkThread(t *testing.T, id string, l recorder.Lineage, parentThread int, threads *int) {
	t.Helper()
	if l.Kind == recorder.LineageFork {
		if l.Thread != *threads {
			t.Fatalf("%s: fork into thread %d, want new thread %d", id, l.Thread, *threads)
		}
		*threads++
		return
	}
	if l.Thread != parentThread {
		t.Fatalf("%s: %s in thread %d, parent's thread is %d", id, l.Kind, l.Thread, parentThread)
	}
}

// FuzzObserveJSON feeds arbitrary request and response bodies to each API:
// never a panic, and a call with a usable request always gets a kind.
func FuzzObserveJSON(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(corpusDir, "*.jsonl"))
	for _, path := range files {
		for _, c := range readCorpus(f, path) {
			f.Add(uint8(0), []byte(c.Request), []byte(c.Response))
		}
	}
	f.Add(uint8(1), []byte(`{"input":"hi","previous_response_id":"r1"}`), []byte(`{"id":"r2","output":[]}`))
	f.Add(uint8(2), []byte(`{"prompt":["a"]}`), []byte(`{"choices":[{"text":"b","index":3}]}`))
	f.Add(uint8(3), []byte(`{"messages":"x","system":[[[[]]]]}`), []byte(`{"content":[{"type":"tool_use","input":{"a":[1e400]}}]}`))
	apis := []string{recorder.APIChatCompletions, recorder.APIResponses, recorder.APICompletions, recorder.APIMessages}
	f.Fuzz(func(t *testing.T, api uint8, req, resp []byte) {
		tr := NewTracker(Options{MaxBytes: 1})
		for i := range 3 {
			c := &recorder.Call{EpisodeID: "ep", CallID: fmt.Sprint(i), API: apis[int(api)%len(apis)], Request: req, Response: resp}
			l, ok := tr.Observe(c)
			if !ok || l.Kind == "" {
				t.Fatalf("Observe #%d = %+v, %v", i, l, ok)
			}
			if i > 0 && l.Kind == recorder.LineageRoot {
				t.Fatalf("Observe #%d = root", i)
			}
		}
	})
}
