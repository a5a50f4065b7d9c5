package assemble

import (
	"bytes"
	"sync"

	"github.com/orchard-rl/orchard/internal/jsonscan"
	"github.com/orchard-rl/orchard/internal/sse"
	"github.com/orchard-rl/orchard/recorder"
)

// Streamer assembles an SSE response as its bytes arrive, so that the proxy
// keeps the assembled state of a stream instead of the stream itself. Feeding
// a body to Write in any number of pieces gives the same Result as [Stream]
// on the whole body. A Streamer is not safe for concurrent use.
type Streamer struct {
	a       streamAssembler
	f       *sse.Framer
	bom     []byte // the first bytes, held until a byte order mark is ruled out
	checked bool
}

// NewStreamer returns a Streamer for the given API (one of the recorder.API*
// names of a generation API), or an error for any other.
func NewStreamer(api recorder.API) (*Streamer, error) {
	a, err := newAssembler(api)
	if err != nil {
		return nil, err
	}
	return &Streamer{a: a, f: framers.Get().(*sse.Framer)}, nil
}

// framers recycles finished streams' framers, whose buffers hold the
// events that arrive in pieces.
var framers = sync.Pool{New: func() any { return newFramer() }}

// newFramer returns a Framer with no limit on an event's size: the whole
// body used to be held anyway, and the proxy bounds what it reads
// elsewhere.
func newFramer() *sse.Framer { return sse.NewFramer(int(^uint(0) >> 1)) }

// recycleFramer hands s's framer, which Result emptied, to a later stream
// and gives s a new one, should it be fed again.
func (s *Streamer) recycleFramer() {
	if s.f.Cap() <= maxRecycled {
		framers.Put(s.f)
	}
	s.f = newFramer()
}

// Write feeds the next bytes of the body. It never fails.
func (s *Streamer) Write(p []byte) (int, error) {
	n := len(p)
	if !s.checked {
		// A leading UTF-8 byte order mark is not part of the first event;
		// hold up to its length of bytes until it is told apart.
		k := min(len(p), len(bom)-len(s.bom))
		s.bom = append(s.bom, p[:k]...)
		if len(s.bom) < len(bom) && bytes.HasPrefix(bom, s.bom) {
			return n, nil
		}
		s.checked = true
		if bytes.Equal(s.bom, bom) {
			p = p[k:]
		} else {
			p = p[k:]
			s.frame(s.bom)
		}
		s.bom = nil
	}
	s.frame(p)
	return n, nil
}

// Event feeds one complete event that the caller framed from the body with
// an [sse.Framer] (ending in its blank line), as Write would have framed it
// from the same bytes; bytes it did not frame (a tail, or everything once
// it gives up framing) go to Write.
func (s *Streamer) Event(raw []byte) {
	if !s.checked {
		if len(s.bom) > 0 || len(raw) > 0 && raw[0] == bom[0] {
			s.Write(raw) // possibly a byte order mark: Write tells
			return
		}
		s.checked = true
	}
	if s.f.Buffered() > 0 {
		s.Write(raw) // after bytes Write holds, it frames this one
		return
	}
	s.event(raw)
}

// EventMembers is Event that also returns the top-level members of data,
// the JSON of raw's one data line (a part of raw), as the assembler found
// them validating the chunk, when it parsed that chunk in full and found it
// one strictly valid object; otherwise (a replayed, buffered, malformed or
// non-chat chunk) ok is false and the caller looks for itself. The
// members' extents are offsets in data, good until the next call.
func (s *Streamer) EventMembers(raw, data []byte) (members []jsonscan.Member, ok bool) {
	c, isChoices := s.a.(*choices)
	if isChoices {
		c.validated = nil
	}
	if s.checked && s.f.Buffered() == 0 && len(data) > 0 && oneDataLine(raw, data) {
		s.a.event("", data) // what Event would find, without a scan
	} else {
		s.Event(raw)
	}
	if !isChoices || len(data) == 0 || len(c.validated) != len(data) || &c.validated[0] != &data[0] {
		return nil, false
	}
	c.validated = nil
	return c.members, true
}

// Span is a JSON value's extent in an event's data: data[Start:End].
type Span = jsonscan.Span

// ReplayStripped feeds one event as Event would, but only when its data (a
// part of raw: the JSON of its one data line) repeats the last chunk that became a template and that
// MarkStripped accepted, outside the values that vary chunk to chunk.
// It then appends data to dst with the values MarkStripped named nulled,
// and reports true. Otherwise it consumes nothing, leaves dst as it was
// and reports false: the caller strips the event itself and feeds it as
// usual. The chunk is validated once, here, in the same scan that
// assembles its values.
func (s *Streamer) ReplayStripped(dst, raw, data []byte) ([]byte, bool) {
	c, ok := s.a.(*choices)
	if !ok || !s.checked || s.f.Buffered() > 0 || len(data) == 0 || !oneDataLine(raw, data) {
		return dst, false
	}
	return c.replayStripped(dst, data)
}

// MarkStripped tells the assembler which values of data, the last event's
// JSON data, its caller nulled in what the client got: a chunk that
// ReplayStripped replays through that event's template gets the same
// values nulled. It reports whether it can do that: when data did not
// become a template, or a value is not one that varies chunk to chunk,
// ReplayStripped declines every chunk until the next call.
func (s *Streamer) MarkStripped(data []byte, values []Span) bool {
	c, ok := s.a.(*choices)
	return ok && c.tpl.markStrip(data, values)
}

// oneDataLine reports whether raw is "data:", an optional space, data (a
// part of raw) and the blank line: an event that sse.Parse reads as
// nameless with data as its data, given that data holds no line break.
func oneDataLine(raw, data []byte) bool {
	k := len(raw) - len(data) - 2
	if k != 5 && k != 6 || string(raw[:5]) != "data:" || (raw[5] == ' ') != (k == 6) ||
		&raw[k] != &data[0] || string(raw[len(raw)-2:]) != "\n\n" {
		return false
	}
	return true
}

func (s *Streamer) frame(p []byte) {
	_, _ = s.f.Feed(p, s.fed) // cannot fail: the limit is the address space
}

// fed is event for an event the framer framed, which tells where its
// first line ends: a one-line data event is then read without a scan.
func (s *Streamer) fed(raw []byte, lineEnd int) {
	if data, ok := sse.OneDataLine(raw, lineEnd); ok {
		s.a.event("", data)
		return
	}
	s.event(raw)
}

var bom = []byte{0xEF, 0xBB, 0xBF}

func (s *Streamer) event(raw []byte) {
	if ev := sse.Parse(raw); ev.HasData {
		s.a.event(ev.Name, ev.Data)
	}
}

// Started reports whether the Result will hold a Response: until then a
// caller that keeps the raw body for the record still needs it.
func (s *Streamer) Started() bool { return s.a.started() }

// Result ends the stream (an unterminated last event counts, as at the end
// of a body) and returns what was assembled. Call it once.
func (s *Streamer) Result() Result {
	if !s.checked {
		s.checked = true
		if !bytes.Equal(s.bom, bom) {
			s.f.Write(s.bom)
		}
	}
	for raw := s.f.Flush(); raw != nil; raw = s.f.Flush() {
		s.event(raw)
	}
	if rest := s.f.Rest(); len(rest) > 0 {
		s.event(rest)
	}
	s.recycleFramer()
	return s.a.result()
}
