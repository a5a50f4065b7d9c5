package recorder

import (
	"encoding/json"
	"math"
	"slices"
	"testing"
)

// TestLogprobsFloat32 checks that float32 logprobs keep what engines send:
// vLLM computes logprobs in float32 and writes them as the float64 of that
// value, which parses back to the same float32, and the short decimals of
// our fixtures print unchanged.
func TestLogprobsFloat32(t *testing.T) {
	tests := []struct {
		name, in, out string
	}{
		{"fixture decimals", `[-0.547,-0.1,-9999,0]`, `[-0.547,-0.1,-9999,0]`},
		{"vllm float32 as float64", `[-0.12345679104328156,-2.384185791015625e-07]`, `[-0.12345679,-2.3841858e-7]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var in []float64
			if err := json.Unmarshal([]byte(tt.in), &in); err != nil {
				t.Fatal(err)
			}
			tok := Tokens{Logprobs: make([]float32, len(in))}
			if err := json.Unmarshal([]byte(tt.in), &tok.Logprobs); err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(tok.Logprobs)
			if string(b) != tt.out {
				t.Errorf("Marshal(%s) = %s, want %s", tt.in, b, tt.out)
			}
			var back []float32
			if err := json.Unmarshal(b, &back); err != nil || !slices.Equal(back, tok.Logprobs) {
				t.Errorf("round trip of %s = %v (%v), want %v", b, back, err, tok.Logprobs)
			}
			for i, v := range in {
				if float64(float32(v)) == v && math.Float32bits(tok.Logprobs[i]) != math.Float32bits(float32(v)) {
					t.Errorf("logprob %d = %v, want exactly %v", i, tok.Logprobs[i], v)
				}
			}
		})
	}
}
