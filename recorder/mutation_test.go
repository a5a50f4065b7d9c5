package recorder

import (
	"math/rand"
	"testing"
)

// TestDecodeMutations runs the decoders on 3000 random mutations of real
// documents (deterministic, unlike the fuzzer): errors only, no panics.
func TestDecodeMutations(t *testing.T) {
	enc := NewEpisodeEncoder(true)
	var seeds [][]byte
	for _, c := range growingEpisode(3, 300) {
		d, blocks, _ := enc.Encode(c)
		seeds = append(seeds, d, Pack(nil, d, blocks))
	}
	rng := rand.New(rand.NewSource(1))
	none := func(BlockHash) ([]byte, bool) { return []byte(`{}`), true }
	for i := 0; i < 3000; i++ {
		b := append([]byte(nil), seeds[rng.Intn(len(seeds))]...)
		for k := rng.Intn(4) + 1; k > 0; k-- {
			b[rng.Intn(len(b))] = byte(rng.Intn(256))
		}
		for _, fn := range []func(){
			func() { NewEpisodeDecoder().Decode(b, none) },
			func() { NewEpisodeEncoder(true).Observe(b) },
			func() { Unpack(b) },
			func() { UnmarshalCall(b) },
		} {
			fn()
		}
	}
}
