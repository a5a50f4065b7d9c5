package recorder

import (
	"fmt"
	"slices"
	"testing"
)

// TestFinishedEncoders: a finished episode is dropped once FinishGrace
// calls have been written since its finish, in finish order, and no more
// than FinishGrace wait however few calls are written.
func TestFinishedEncoders(t *testing.T) {
	var f FinishedEncoders
	var dropped []string
	drop := func(ep string) { dropped = append(dropped, ep) }
	f.Finished("a", drop)
	f.Wrote(10, drop)
	f.Finished("b", drop)
	f.Wrote(FinishGrace-11, drop)
	if len(dropped) != 0 {
		t.Fatalf("dropped %v one call before a's grace ended", dropped)
	}
	f.Wrote(1, drop)
	if !slices.Equal(dropped, []string{"a"}) || f.Len() != 1 {
		t.Fatalf("dropped %v, %d waiting; want [a], 1", dropped, f.Len())
	}
	f.Wrote(10, drop)
	if !slices.Equal(dropped, []string{"a", "b"}) || f.Len() != 0 {
		t.Fatalf("dropped %v, %d waiting; want [a b], 0", dropped, f.Len())
	}
	dropped = nil
	for i := range FinishGrace + 3 { // finishes without calls
		f.Finished(fmt.Sprint(i), drop)
	}
	if !slices.Equal(dropped, []string{"0", "1", "2"}) || f.Len() != FinishGrace {
		t.Fatalf("after %d finishes without calls: dropped %v, %d waiting; want [0 1 2], %d", FinishGrace+3, dropped, f.Len(), FinishGrace)
	}
}
