package lineage

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orchard-rl/orchard/recorder"
)

var update = flag.Bool("update", false, "rewrite the golden files of the drift corpus")

// corpusDir holds one episode per drift class; gen_corpus.py there made it.
const corpusDir = "../../testdata/lineage"

// wantKinds is the expected kind of each call of each corpus episode, in
// order, stated independently of the golden files.
var wantKinds = map[string][]string{
	"continuation-chat-tokens":      {"root", "extend", "extend", "extend"},
	"continuation-messages":         {"root", "extend", "extend", "extend"},
	"continuation-completions":      {"root", "extend", "retry", "extend"},
	"retokenized-chat-tokens":       {"root", "retokenized", "retokenized"},
	"template-rewrite-qwen3-tokens": {"root", "extend", "template_rewrite", "extend"},
	"edited-chat-tokens":            {"root", "extend", "extend", "edited"},
	"edited-chat":                   {"root", "extend", "extend", "edited"},
	"compacted-chat-tokens":         {"root", "extend", "extend", "extend", "compacted", "extend"},
	"compacted-responses":           {"root", "extend", "extend", "compacted", "extend"},
	"fork-chat-tokens":              {"root", "fork", "extend"},
	"fork-messages":                 {"root", "fork", "extend", "extend", "fork"},
	"retry-chat-tokens":             {"root", "extend", "retry", "extend"},
	"retry-responses":               {"root", "retry", "extend"},
}

// withoutTokens is the kind a call gets when its token ids are removed:
// drift between ids is invisible at the message level.
var withoutTokens = map[string]string{
	recorder.LineageRetokenized:     recorder.LineageExtend,
	recorder.LineageTemplateRewrite: recorder.LineageExtend,
}

func readCorpus(t testing.TB, path string) []*recorder.Call {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var calls []*recorder.Call
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var c recorder.Call
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		calls = append(calls, &c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return calls
}

func formatLineage(calls []*recorder.Call, lins []recorder.Lineage) []byte {
	var b bytes.Buffer
	for i, l := range lins {
		parent := l.ParentCallID
		if parent == "" {
			parent = "-"
		}
		fmt.Fprintf(&b, "%s %s parent=%s thread=%d prefix_tokens=%d prefix_messages=%d\n",
			calls[i].CallID, l.Kind, parent, l.Thread, l.CommonPrefixTokens, l.CommonPrefixMsgs)
	}
	return b.Bytes()
}

func TestCorpus(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(corpusDir, "*.jsonl"))
	if err != nil || len(files) != len(wantKinds) {
		t.Fatalf("corpus has %d files (%v), want %d", len(files), err, len(wantKinds))
	}
	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".jsonl")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			calls := readCorpus(t, path)
			got := Classify(calls)
			want, ok := wantKinds[name]
			if !ok || len(want) != len(got) {
				t.Fatalf("episode has %d calls, wantKinds has %d", len(got), len(want))
			}
			for i, l := range got {
				if l.Kind != want[i] {
					t.Errorf("%s: Kind = %s, want %s", calls[i].CallID, l.Kind, want[i])
				}
			}
			checkGolden(t, strings.TrimSuffix(path, ".jsonl")+".golden", formatLineage(calls, got))
		})
	}
}

func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("lineage differs from %s:\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// TestCorpusWithoutTokens classifies the corpus with token ids removed:
// the message level alone must find the same threads.
func TestCorpusWithoutTokens(t *testing.T) {
	for name, want := range wantKinds {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			calls := readCorpus(t, filepath.Join(corpusDir, name+".jsonl"))
			for _, c := range calls {
				c.Tokens = nil
			}
			for i, l := range Classify(calls) {
				w := want[i]
				if k, ok := withoutTokens[w]; ok {
					w = k
				}
				if l.Kind != w || l.CommonPrefixTokens != 0 {
					t.Errorf("%s: Kind, CommonPrefixTokens = %s, %d, want %s, 0", calls[i].CallID, l.Kind, l.CommonPrefixTokens, w)
				}
			}
		})
	}
}

// TestCorpusOnline feeds all episodes interleaved through one Tracker, as
// the proxy would, and expects the offline result for each.
func TestCorpusOnline(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(corpusDir, "*.jsonl"))
	var eps [][]*recorder.Call
	for _, f := range files {
		eps = append(eps, readCorpus(t, f))
	}
	tr := NewTracker(Options{MaxBytes: -1})
	got := make([][]recorder.Lineage, len(eps))
	for i := 0; ; i++ {
		done := true
		for e, calls := range eps {
			if i < len(calls) {
				done = false
				l, ok := tr.Observe(calls[i])
				if !ok {
					t.Fatalf("Observe(%s) = false", calls[i].CallID)
				}
				got[e] = append(got[e], l)
			}
		}
		if done {
			break
		}
	}
	for e, calls := range eps {
		want := Classify(calls)
		for i := range calls {
			if got[e][i] != want[i] {
				t.Errorf("%s: Observe = %+v, Classify = %+v", calls[i].CallID, got[e][i], want[i])
			}
		}
	}
}
