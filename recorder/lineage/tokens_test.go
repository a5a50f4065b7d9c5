package lineage

import (
	"fmt"
	"slices"
	"testing"

	"github.com/orchard-rl/orchard/recorder"
)

// tokCall returns a chat.completions call that has only token ids.
func tokCall(id string, prompt, completion []int32) *recorder.Call {
	return &recorder.Call{
		Schema: recorder.CallSchema, EpisodeID: "ep", CallID: id, API: recorder.APIChatCompletions,
		RequestRaw: true, Request: []byte(`"x"`),
		Tokens: &recorder.Tokens{PromptIDs: prompt, CompletionIDs: completion},
	}
}

func seq(from, n int) []int32 {
	s := make([]int32, n)
	for i := range s {
		s[i] = int32(from + i)
	}
	return s
}

func cat(parts ...[]int32) []int32 { return slices.Concat(parts...) }

func TestTokenKinds(t *testing.T) {
	sys := seq(1000, 150) // a system prompt longer than two blocks
	u1, a1 := seq(5000, 10), seq(6000, 20)
	u2, a2 := seq(7000, 10), seq(8000, 5)
	other := seq(9000, 40)
	tests := []struct {
		name  string
		calls [][2][]int32 // prompt, completion
		want  []string     // "kind parent thread prefixTokens"
	}{
		{
			name: "extend chain",
			calls: [][2][]int32{
				{cat(sys, u1), a1},
				{cat(sys, u1, a1, u2), a2},
				{cat(sys, u1, a1, u2, a2), nil},
			},
			want: []string{"root - 0 0", "extend c0 0 180", "extend c1 0 195"},
		},
		{
			name: "retry then extend the retry",
			calls: [][2][]int32{
				{cat(sys, u1), a1},
				{cat(sys, u1), a2},
				{cat(sys, u1, a2, u2), nil},
			},
			want: []string{"root - 0 0", "retry c0 0 160", "extend c1 0 165"},
		},
		{
			name: "parallel branch forks",
			calls: [][2][]int32{
				{cat(sys, u1), a1},
				{cat(sys, u1, a1, u2), a2},
				{cat(sys, u1, a1, other), nil},
			},
			want: []string{"root - 0 0", "extend c0 0 180", "fork c0 1 180"},
		},
		{
			name: "unrelated prompt forks",
			calls: [][2][]int32{
				{cat(sys, u1), a1},
				{cat(other, u2), a2},
			},
			want: []string{"root - 0 0", "fork c0 1 0"},
		},
		{
			name: "short prompt keeping the prefix compacts",
			calls: [][2][]int32{
				{cat(sys, u1, a1, u2, seq(20000, 400)), a2},
				{cat(sys, other), nil},
			},
			want: []string{"root - 0 0", "compacted c0 0 150"},
		},
		{
			name: "most history kept is an edit",
			calls: [][2][]int32{
				{cat(sys, u1, a1, u2), a2},
				{cat(sys, u1, a1, seq(30000, 3)), nil},
			},
			want: []string{"root - 0 0", "edited c0 0 180"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var calls []*recorder.Call
			for i, pc := range tt.calls {
				calls = append(calls, tokCall(fmt.Sprintf("c%d", i), pc[0], pc[1]))
			}
			got := Classify(calls)
			for i, l := range got {
				parent := l.ParentCallID
				if parent == "" {
					parent = "-"
				}
				s := fmt.Sprintf("%s %s %d %d", l.Kind, parent, l.Thread, l.CommonPrefixTokens)
				if s != tt.want[i] {
					t.Errorf("call %d: Classify = %q, want %q", i, s, tt.want[i])
				}
			}
		})
	}
}
