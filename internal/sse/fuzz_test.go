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

// FuzzFeedLimit feeds arbitrary bytes in arbitrary pieces to a Framer with
// a small limit, as the proxy's stripper does: until Feed refuses a piece,
// the events it passed on, then Rest, then the bytes it did not take must
// be the input, exactly once and in order.
func FuzzFeedLimit(f *testing.F) {
	f.Add([]byte("data: a\n\ndata: bbbbbbbbbbbbbbbb\n\ndata: c\n\n"), uint8(12), uint8(5))
	f.Add([]byte("data: 1234567890\r\n\r\n"), uint8(4), uint8(1))
	f.Fuzz(func(t *testing.T, in []byte, max, step uint8) {
		fr := NewFramer(1 + int(max))
		var out []byte
		rest := in
		for len(rest) > 0 {
			n := min(len(rest), 1+int(step))
			piece := bytes.Clone(rest[:n])
			unfed, err := fr.Feed(piece, func(ev []byte, lineEnd int) {
				checkFed(t, ev, lineEnd)
				out = append(out, ev...)
			})
			if err != nil {
				out = append(append(out, fr.Rest()...), unfed...)
				out = append(out, rest[n:]...)
				rest = nil
				break
			}
			if unfed != nil {
				t.Fatalf("Feed handed back %q without an error", unfed)
			}
			for i := range piece {
				piece[i] = 'X' // Feed must have kept nothing of it
			}
			rest = rest[n:]
		}
		for ev := fr.Flush(); ev != nil; ev = fr.Flush() {
			out = append(out, ev...)
		}
		out = append(out, fr.Rest()...)
		if !bytes.Equal(out, in) {
			t.Fatalf("got %q, want %q", out, in)
		}
	})
}

// checkFed holds what Feed passes with an event to the event: lineEnd is
// the index of its first "\r" or "\n", and OneDataLine, when it takes the
// event, gives what Parse gives.
func checkFed(t testing.TB, ev []byte, lineEnd int) {
	t.Helper()
	if want := bytes.IndexAny(ev, "\r\n"); lineEnd != want {
		t.Fatalf("event %q: line end %d, want %d", ev, lineEnd, want)
	}
	data, ok := OneDataLine(ev, lineEnd)
	if !ok {
		return
	}
	if p := Parse(ev); !p.HasData || !bytes.Equal(p.Data, data) || p.Name != "" || p.ID != "" || len(p.Comments) > 0 {
		t.Fatalf("event %q: OneDataLine %q, Parse %+v", ev, data, p)
	}
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
