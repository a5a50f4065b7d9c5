package recorder

import "testing"

// BenchmarkEncode measures the store's per-call work on a vLLM chat
// episode (30 turns, prompts of 2,000 to 6,350 ids): Encode and Pack of
// every call with dedup, as the embedded and Redis writers do, and the
// self-contained MarshalCall the spill file uses. Reported per episode.
func BenchmarkEncode(b *testing.B) {
	calls := vllmEpisode(30)
	b.Run("dedup", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			e := NewEpisodeEncoder(true)
			for _, c := range calls {
				d, blocks, err := e.Encode(c)
				if err != nil {
					b.Fatal(err)
				}
				buf = Pack(buf[:0], d, blocks)
			}
		}
	})
	b.Run("spill", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, c := range calls {
				if _, err := MarshalCall(c); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// BenchmarkDecode measures reading the same episode back.
func BenchmarkDecode(b *testing.B) {
	var s storedEpisode
	e := NewEpisodeEncoder(true)
	for _, c := range vllmEpisode(30) {
		s.write(b, e, c)
	}
	b.ReportAllocs()
	for b.Loop() {
		s.read(b)
	}
}
