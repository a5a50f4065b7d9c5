package lineage_test

import (
	"fmt"

	"github.com/orchard-rl/orchard/recorder"
	"github.com/orchard-rl/orchard/recorder/lineage"
)

func Example_observe() {
	tr := lineage.NewTracker(lineage.Options{MaxBytes: 8 << 20})
	call := func(id string, prompt, completion []int32) *recorder.Call {
		return &recorder.Call{
			EpisodeID: "ep-42", CallID: id, API: recorder.APIChatCompletions,
			Request: []byte(`{}`), Tokens: &recorder.Tokens{PromptIDs: prompt, CompletionIDs: completion},
		}
	}
	for _, c := range []*recorder.Call{
		call("c1", []int32{1, 2, 3}, []int32{4, 5}),
		call("c2", []int32{1, 2, 3, 4, 5, 6}, []int32{7}), // continues c1 token for token
		call("c3", []int32{1, 2, 3, 4, 5, 6}, []int32{8}), // the same prompt again
		call("c4", []int32{1, 2, 3, 4, 5, 6, 8, 9}, nil),  // continues the retry
	} {
		lin, _ := tr.Observe(c)
		c.Lineage = &lin
		fmt.Printf("%s %s parent=%s thread=%d common=%d\n", c.CallID, lin.Kind, lin.ParentCallID, lin.Thread, lin.CommonPrefixTokens)
	}
	tr.Forget("ep-42")
	// Output:
	// c1 root parent= thread=0 common=0
	// c2 extend parent=c1 thread=0 common=5
	// c3 retry parent=c2 thread=0 common=6
	// c4 extend parent=c3 thread=0 common=7
}
