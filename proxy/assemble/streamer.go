package assemble

import (
	"bytes"
	"fmt"

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
func NewStreamer(api string) (*Streamer, error) {
	var a streamAssembler
	switch api {
	case recorder.APIChatCompletions:
		a = newChoices(true)
	case recorder.APICompletions:
		a = newChoices(false)
	case recorder.APIResponses:
		a = &responses{}
	case recorder.APIMessages:
		a = &messages{}
	default:
		return nil, fmt.Errorf("assemble: unsupported api %q", api)
	}
	// No limit on an event's size: the whole body used to be held anyway,
	// and the proxy bounds what it reads elsewhere.
	return &Streamer{a: a, f: sse.NewFramer(int(^uint(0) >> 1))}, nil
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

func (s *Streamer) frame(p []byte) {
	s.f.Feed(p, s.event) // cannot fail: the limit is the address space
}

var bom = []byte{0xEF, 0xBB, 0xBF}

func (s *Streamer) event(raw []byte) {
	if data, ok := dataOnly(raw); ok {
		s.a.event("", data)
		return
	}
	ev := sse.Parse(raw)
	if ev.HasData {
		s.a.event(ev.Name, ev.Data)
	}
}

// dataOnly returns the data of an event that is one "data:" line and its
// blank line ("data: X\n\n", the shape of every chat and completions
// event), which sse.Parse would return too, without walking it line by line.
func dataOnly(raw []byte) ([]byte, bool) {
	if len(raw) < 7 || string(raw[:5]) != "data:" || string(raw[len(raw)-2:]) != "\n\n" {
		return nil, false
	}
	d := raw[5 : len(raw)-2]
	if len(d) > 0 && d[0] == ' ' {
		d = d[1:]
	}
	if bytes.IndexByte(d, '\n') >= 0 || bytes.IndexByte(d, '\r') >= 0 {
		return nil, false
	}
	return d, true
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
	return s.a.result()
}
