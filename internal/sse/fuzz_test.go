package sse

import (
	"bytes"
	"testing"
)

// FuzzFramer checks, for arbitrary bytes split at an arbitrary point, that the
// Framer returns every byte exactly once and finds the same events as Events.
func FuzzFramer(f *testing.F) {
	for _, tc := range parseCases {
		f.Add([]byte(tc.in), uint16(3))
	}
	f.Add([]byte("\r\r\n\n\r"), uint16(1))
	f.Fuzz(func(t *testing.T, in []byte, cut uint16) {
		c := int(cut) % (len(in) + 1)
		for _, feed := range []bool{false, true} {
			got, raw := frame(t, in, c, feed)
			if !bytes.Equal(raw, in) {
				t.Fatalf("feed %v: round trip %q, want %q", feed, raw, in)
			}
			if want := collect(in); !eq(got, want) {
				t.Fatalf("feed %v: events %+v, want %+v", feed, got, want)
			}
		}
	})
}

// FuzzParse checks Parse never panics, data never exceeds the input, and the
// fast path gives what the line-by-line parse gives.
func FuzzParse(f *testing.F) {
	for _, tc := range parseCases {
		f.Add([]byte(tc.in))
	}
	f.Add([]byte("data: {\"a\":1}\n\n"))
	f.Add([]byte("data:x\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		ev := Parse(in)
		if len(ev.Data) > len(in) {
			t.Fatalf("data %d bytes from %d", len(ev.Data), len(in))
		}
		// The one-data-line fast path must agree with the general parse.
		if slow := parseLines(in); ev.HasData != slow.HasData || !eq([]wantEv{toWant(ev)}, []wantEv{toWant(slow)}) {
			t.Fatalf("Parse(%q) = %+v, parseLines = %+v", in, toWant(ev), toWant(slow))
		}
	})
}
