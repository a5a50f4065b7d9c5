package assemble

import (
	"encoding/json"
	"math"
	"strconv"
	"testing"
)

// FuzzExactFloat holds exactFloat to strconv.ParseFloat: where it answers,
// it answers the same bits.
func FuzzExactFloat(f *testing.F) {
	for _, s := range []string{"-0.125", "-0", "0", "1e22", "-1.5e-05", "123456789012345", "9007199254740993", "0.1", "-3.4028235e38", "1E+2", "00", "-", "1.", ".5", "1e", "2.5e-22"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := exactFloat(b)
		if !ok {
			return
		}
		want, err := strconv.ParseFloat(string(b), 64)
		if err != nil || !json.Valid(b) {
			t.Fatalf("exactFloat(%q) = %v, but ParseFloat says %v (%v), json.Valid %v", b, got, want, err, json.Valid(b))
		}
		if math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("exactFloat(%q) = %v, ParseFloat %v", b, got, want)
		}
	})
}
