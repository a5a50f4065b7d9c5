package lineage

import (
	"testing"

	"github.com/orchard-rl/orchard/recorder"
)

// TestReclassify: lineage recorded from partial history (a replica that
// saw only the second call called it a root) is replaced by what one
// tracker gives for the whole episode; a call that makes no turn has none.
func TestReclassify(t *testing.T) {
	c1, c2 := tokCall("c1", seq(0, 10), seq(10, 2)), tokCall("c2", seq(0, 14), nil)
	count := tokCall("c3", seq(0, 3), nil)
	count.API = recorder.APICountTokens
	c2.Lineage = &recorder.Lineage{Kind: recorder.LineageRoot}
	count.Lineage = &recorder.Lineage{Kind: recorder.LineageRoot}
	calls := []*recorder.Call{c1, c2, count}
	Reclassify(calls)
	if l := c1.Lineage; l == nil || l.Kind != recorder.LineageRoot {
		t.Errorf("c1 lineage = %+v, want root", l)
	}
	if l := c2.Lineage; l == nil || l.Kind != recorder.LineageExtend || l.ParentCallID != "c1" {
		t.Errorf("c2 lineage = %+v, want extend of c1", l)
	}
	if count.Lineage != nil {
		t.Errorf("count_tokens lineage = %+v, want nil", count.Lineage)
	}
}
