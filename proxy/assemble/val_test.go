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

// FuzzFloat32Of holds float32Of to float32(strconv.ParseFloat(b, 64)):
// where it answers, it answers the same bits.
func FuzzFloat32Of(f *testing.F) {
	for _, s := range []string{"-0.009614944458007812", "-1.1920928244535389e-07", "-2.706014311115723e-05",
		"-5.509614944458008", "0.0", "-0", "-0.125", "-9999.0", "1e22", "1e23", "-1.5e-45", "3.4028235e38",
		"0.10000000149011612", "0.1", "1.0000000596046448", "16777217", "0.000000000000000000000000000000000000000000001",
		"123456789012345678901", "1.00000000000000000000", "-0.", "01", "1e1000", "1e-44", "9.999999999999999e22"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := float32Of(b)
		if !ok {
			return
		}
		want, err := strconv.ParseFloat(string(b), 64)
		if err != nil || !json.Valid(b) {
			t.Fatalf("float32Of(%q) = %v, but ParseFloat says %v (%v), json.Valid %v", b, got, want, err, json.Valid(b))
		}
		if math.Float32bits(got) != math.Float32bits(float32(want)) {
			t.Fatalf("float32Of(%q) = %v (%#x), float32(ParseFloat) %v (%#x)", b, got, math.Float32bits(got), float32(want), math.Float32bits(float32(want)))
		}
	})
}

// TestFloat32OfEngineLogprobs: a float32 an engine sends, printed as Python
// prints it (the shortest decimal of its double), is read without strconv,
// to its own bits; a sample of the float32s from 2^-119 to 2^60.
func TestFloat32OfEngineLogprobs(t *testing.T) {
	declined := 0
	for u := uint32(0x04000000); u < 0x5d800000; u += 0x1234 + u>>20 {
		for _, x := range []float32{math.Float32frombits(u), -math.Float32frombits(u)} {
			s := strconv.FormatFloat(float64(x), 'g', -1, 64)
			got, ok := float32Of([]byte(s))
			if !ok {
				declined++
				continue
			}
			if math.Float32bits(got) != math.Float32bits(x) {
				t.Fatalf("float32Of(%q) = %v, want %v", s, got, x)
			}
		}
	}
	if declined > 0 {
		t.Errorf("%d engine logprobs declined", declined)
	}
}

// TestFloat32OfMidpoints: decimals on and around the doubles halfway
// between two float32s, where rounding the decimal to a double first can
// change the float32, are declined or read as ParseFloat reads them.
func TestFloat32OfMidpoints(t *testing.T) {
	for u := uint32(0x04000000); u < 0x5d800000; u += 0x4321 + u>>19 {
		a := float64(math.Float32frombits(u))
		mid := (a + float64(math.Float32frombits(u+1))) / 2
		for _, x := range []float64{mid, math.Nextafter(mid, 0), math.Nextafter(mid, 1e300),
			math.Nextafter(math.Nextafter(mid, 0), 0), -mid} {
			for _, s := range []string{strconv.FormatFloat(x, 'g', -1, 64), strconv.FormatFloat(x, 'e', 18, 64)} {
				got, ok := float32Of([]byte(s))
				want, _ := strconv.ParseFloat(s, 64)
				if ok && math.Float32bits(got) != math.Float32bits(float32(want)) {
					t.Fatalf("float32Of(%q) = %v, float32(ParseFloat) %v", s, got, float32(want))
				}
			}
		}
	}
}
