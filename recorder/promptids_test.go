package recorder

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestIsIDsJSON checks isIDsJSON against its definition: raw equals
// appendIDsJSON(nil, ids).
func TestIsIDsJSON(t *testing.T) {
	idss := [][]int32{nil, {}, {0}, {7}, {10}, {-1}, {0, 0}, {1, 23, 456},
		{math.MaxInt32, math.MinInt32, 0, -5}, {100000, 99999}}
	r := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		ids := make([]int32, r.IntN(20))
		for i := range ids {
			ids[i] = int32(r.Uint32() >> r.IntN(32))
		}
		idss = append(idss, ids)
	}
	raws := []string{"", "[", "]", "[]", "[0]", "[00]", "[-0]", "[01]", "[ 1]", "[1 ]", "[1,,2]", "[1,2,]",
		"[,1]", "[1.0]", "[1e2]", "[+1]", "[2147483648]", "[-2147483649]", "[21474836470]", "[99999999999]",
		"[\"1\"]", "[1,23,456]", "[1,23,4567]", "[1, 23,456]", "[--1]", "[-]", "[1-]"}
	for _, ids := range idss {
		good := string(appendIDsJSON(nil, ids))
		cands := append([]string{good, good + " ", " " + good}, raws...)
		for i := range good {
			cands = append(cands, good[:i]+good[i+1:], good[:i]+"0"+good[i:], good[:i]+"-"+good[i:])
		}
		for _, raw := range cands {
			if got, want := isIDsJSON(raw, ids), raw == good; got != want {
				t.Errorf("isIDsJSON(%q, %v) = %v, want %v", raw, ids, got, want)
			}
		}
	}
}
