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
		got, raw := frame(t, in, c)
		if !bytes.Equal(raw, in) {
			t.Fatalf("round trip %q, want %q", raw, in)
		}
		if want := collect(in); !eq(got, want) {
			t.Fatalf("events %+v, want %+v", got, want)
		}
	})
}

// FuzzParse checks Parse never panics and data never exceeds the input.
func FuzzParse(f *testing.F) {
	for _, tc := range parseCases {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		ev := Parse(in)
		if len(ev.Data) > len(in) {
			t.Fatalf("data %d bytes from %d", len(ev.Data), len(in))
		}
	})
}
