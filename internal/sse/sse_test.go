package sse

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

type wantEv struct {
	name, data, id string
	comments       []string
}

func collect(body []byte) []wantEv {
	var out []wantEv
	for ev := range Events(body) {
		out = append(out, toWant(ev))
	}
	return out
}

func toWant(ev Event) wantEv {
	w := wantEv{name: ev.Name, data: string(ev.Data), id: ev.ID}
	for _, c := range ev.Comments {
		w.comments = append(w.comments, string(c))
	}
	return w
}

func eq(a, b []wantEv) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].name != b[i].name || a[i].data != b[i].data || a[i].id != b[i].id ||
			strings.Join(a[i].comments, "|") != strings.Join(b[i].comments, "|") {
			return false
		}
	}
	return true
}

var parseCases = []struct {
	name string
	in   string
	want []wantEv
}{
	{"lf", "data: a\n\ndata: b\n\n", []wantEv{{data: "a"}, {data: "b"}}},
	{"crlf", "data: a\r\n\r\ndata: b\r\n\r\n", []wantEv{{data: "a"}, {data: "b"}}},
	{"cr", "data: a\r\rdata: b\r\r", []wantEv{{data: "a"}, {data: "b"}}},
	{"mixed", "event: x\r\ndata: 1\rdata: 2\n\r\n", []wantEv{{name: "x", data: "1\n2"}}},
	{"no trailing blank", "data: a\n\ndata: last", []wantEv{{data: "a"}, {data: "last"}}},
	{"comment", ": ping\n\ndata: a\n\n", []wantEv{{comments: []string{": ping"}}, {data: "a"}}},
	{"no space", "data:x\nevent:e\n\n", []wantEv{{name: "e", data: "x"}}},
	{"two spaces", "data:  x\n\n", []wantEv{{data: " x"}}},
	{"empty data", "data\n\n", []wantEv{{data: ""}}},
	{"three lines", "data: a\ndata: b\ndata: c\n\n", []wantEv{{data: "a\nb\nc"}}},
	{"id and unknown", "id: 7\nretry: 10\nfoo: bar\ndata: d\n\n", []wantEv{{id: "7", data: "d"}}},
	{"extra blank lines", "\n\ndata: a\n\n\n\n", []wantEv{{data: "a"}}},
	{"bom", "\xEF\xBB\xBFdata: a\n\n", []wantEv{{data: "a"}}},
	{"done", "data: [DONE]\n\n", []wantEv{{data: "[DONE]"}}},
}

func TestEvents(t *testing.T) {
	t.Parallel()
	for _, tc := range parseCases {
		t.Run(tc.name, func(t *testing.T) {
			if got := collect([]byte(tc.in)); !eq(got, tc.want) {
				t.Errorf("Events(%q) = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
}

// TestFramerSplits feeds every body of parseCases split at every position and
// checks the events and the byte-exact round trip.
func TestFramerSplits(t *testing.T) {
	t.Parallel()
	for _, tc := range parseCases {
		in := []byte(tc.in)
		for cut := 0; cut <= len(in); cut++ {
			for _, feed := range []bool{false, true} {
				got, raw := frame(t, in, cut, feed)
				if !bytes.Equal(raw, in) {
					t.Fatalf("%s cut %d feed %v: round trip %q, want %q", tc.name, cut, feed, raw, in)
				}
				if want := collect(in); !eq(got, want) {
					t.Fatalf("%s cut %d feed %v: events %+v, want %+v", tc.name, cut, feed, got, want)
				}
			}
		}
	}
}

// frame splits in into two writes at cut, with Write and Next, or with Feed.
func frame(t testing.TB, in []byte, cut int, feed bool) ([]wantEv, []byte) {
	f := NewFramer(0)
	var raw []byte
	var got []wantEv
	take := func(ev []byte) {
		raw = append(raw, ev...)
		if len(raw) == len(ev) {
			ev = bytes.TrimPrefix(ev, bom)
		}
		if e := Parse(ev); !e.IsBlank() {
			got = append(got, toWant(e))
		}
	}
	for _, part := range [][]byte{in[:cut], in[cut:]} {
		if feed {
			// Feed may frame part in place: hand it a copy that is
			// clobbered afterwards, so an event kept past fn would show.
			cp := bytes.Clone(part)
			if _, err := f.Feed(cp, func(ev []byte, lineEnd int) {
				checkFed(t, ev, lineEnd)
				take(bytes.Clone(ev))
			}); err != nil {
				t.Fatal(err)
			}
			for i := range cp {
				cp[i] = 'X'
			}
			continue
		}
		if _, err := f.Write(part); err != nil {
			t.Fatal(err)
		}
		for ev := f.Next(); ev != nil; ev = f.Next() {
			take(bytes.Clone(ev))
		}
	}
	for ev := f.Flush(); ev != nil; ev = f.Flush() {
		take(bytes.Clone(ev))
	}
	if rest := f.Rest(); len(rest) > 0 {
		take(bytes.Clone(rest))
	}
	return got, raw
}

func TestFramerTooLarge(t *testing.T) {
	t.Parallel()
	f := NewFramer(10)
	if _, err := f.Write([]byte("data: 12")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("345")); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Write error = %v, want ErrTooLarge", err)
	}
	if _, err := f.Write([]byte("\n\n")); err != nil {
		t.Fatalf("Write after refusal: %v", err)
	}
	if got := string(f.Next()); got != "data: 12\n\n" {
		t.Fatalf("Next() = %q", got)
	}
}

// TestFeedTooLarge checks that a refused Feed hands back what it did not
// take, so that the events it passed on, Rest and those bytes are the
// stream, in order and exactly once: whether the event that outgrew the
// limit was pending before the call or began in p.
func TestFeedTooLarge(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, pending, p, events, rest, unfed string
	}{
		{"pending", "data: 1", "23456789\n\n", "", "data: 1", "23456789\n\n"},
		{"in p", "", "data: a\n\ndata: 123456789", "data: a\n\n", "", "data: 123456789"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFramer(12)
			if _, err := f.Feed([]byte(tc.pending), func([]byte, int) { t.Fatal("an event before the refusal") }); err != nil {
				t.Fatal(err)
			}
			var events []byte
			unfed, err := f.Feed([]byte(tc.p), func(ev []byte, _ int) { events = append(events, ev...) })
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("Feed error = %v, want ErrTooLarge", err)
			}
			if rest := f.Rest(); string(events) != tc.events || string(rest) != tc.rest || string(unfed) != tc.unfed {
				t.Fatalf("events %q, Rest %q, not taken %q; want %q, %q, %q", events, rest, unfed, tc.events, tc.rest, tc.unfed)
			}
		})
	}
}

// TestFramerCRWait checks that a trailing "\r" is held until the next byte
// tells whether it starts "\r\n".
func TestFramerCRWait(t *testing.T) {
	t.Parallel()
	f := NewFramer(0)
	f.Write([]byte("data: a\r\n\r"))
	if ev := f.Next(); ev != nil {
		t.Fatalf("Next() = %q before the \\n arrived", ev)
	}
	f.Write([]byte("\ndata: b"))
	if got := string(f.Next()); got != "data: a\r\n\r\n" {
		t.Fatalf("Next() = %q", got)
	}
	if got := string(f.Rest()); got != "data: b" {
		t.Fatalf("Rest() = %q", got)
	}
}
