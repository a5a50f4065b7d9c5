package sse

import (
	"bytes"
	"errors"
	"fmt"
)

// ErrTooLarge is returned when a single event grows past the configured
// maximum size without being terminated by a blank line.
var ErrTooLarge = errors.New("sse: event too large")

// DefaultMaxEvent is the maximum event size used when none is given: 16 MiB.
const DefaultMaxEvent = 16 << 20

// Framer splits a byte stream into raw SSE events as the bytes arrive. It is
// the proxy's hot-path splitter: it never copies an event out of its buffer and
// allocates only when the buffer has to grow.
//
// Every byte written comes back out exactly once, in order: the concatenation
// of all slices returned by [Framer.Next] followed by [Framer.Rest] equals the
// concatenation of all writes. An event is a run of lines ended by a blank
// line; line endings may be "\n", "\r\n" or "\r" (WHATWG SSE). A lone blank
// line (for example extra separators) comes back as its own event.
//
// A Framer is not safe for concurrent use.
type Framer struct {
	buf   []byte
	start int // first byte of the pending event
	scan  int // bytes before scan, from start, contain no event end
	// eol is 1 + the offset from start of the pending event's first line
	// terminator; 0: none found yet.
	eol   int
	lineS bool
	max   int
	// cr: buf holds no '\r' from the scan position up to cr, where there
	// is one, or the buffer ended when it was searched: a stream whose
	// lines end in "\n" alone is searched for '\r' once per buffer, not
	// once per line. Positions move with buf's bytes, so compacting buf
	// resets it.
	cr int
}

// NewFramer returns a Framer whose pending (unterminated) event may grow to
// max bytes; max <= 0 means [DefaultMaxEvent].
func NewFramer(max int) *Framer {
	if max <= 0 {
		max = DefaultMaxEvent
	}
	return &Framer{max: max, lineS: true}
}

// Write appends p to the stream. It returns [ErrTooLarge] (and keeps nothing
// of p) when the pending event would exceed the maximum size. Slices returned
// earlier by Next are invalid after Write.
func (f *Framer) Write(p []byte) (int, error) {
	if f.start > 0 {
		n := copy(f.buf, f.buf[f.start:])
		f.buf = f.buf[:n]
		f.scan -= f.start
		f.start, f.cr = 0, 0
	}
	if len(f.buf)+len(p) > f.max {
		return 0, fmt.Errorf("pending %d bytes + %d: %w", len(f.buf), len(p), ErrTooLarge)
	}
	f.buf = append(f.buf, p...)
	return len(p), nil
}

// Feed is Write followed by Next until it returns nil, calling fn with each
// complete event and the index in it of its first line's terminator (so
// that a caller can tell a one-line event, the usual "data: X\n\n", from
// the rest without scanning it again; see [OneDataLine]). When nothing is
// pending it frames p in place, so events that arrive whole (the usual
// case: one event per upstream write) are never copied; only an
// unterminated tail is kept. The slices passed to fn are valid only during
// the call. Errors are Write's; with one, Feed returns the bytes of p it
// did not take (it keeps nothing of them), which follow Rest's in the
// stream.
func (f *Framer) Feed(p []byte, fn func(ev []byte, lineEnd int)) ([]byte, error) {
	// Finish a pending event by copying p a little at a time, so the buffer
	// stays about one event long whatever the size of p. The events after
	// it are framed in p itself, below, not copied.
	for f.Buffered() > 0 {
		if len(p) == 0 {
			return nil, nil
		}
		k := min(len(p), feedStep)
		if _, err := f.Write(p[:k]); err != nil {
			return p, err
		}
		ev, eol := f.next(false)
		if ev == nil {
			p = p[k:]
			continue
		}
		// The buffer held no event end before this Write, so what follows
		// the event in it is the tail of p[:k].
		p = p[k-f.Buffered():]
		f.buf = f.buf[:f.start]
		fn(ev, eol)
	}
	f.buf, f.start, f.scan, f.eol, f.cr = f.buf[:0], 0, 0, 0, 0
	// Nothing pending: scan p itself with a Framer that borrows it.
	in := Framer{buf: p, lineS: true, max: f.max}
	for ev, eol := in.next(false); ev != nil; ev, eol = in.next(false) {
		fn(ev, eol)
	}
	if rest := p[in.start:]; len(rest) > 0 {
		f.buf, f.start, f.scan, f.eol, f.lineS, f.cr = f.buf[:0], 0, 0, 0, true, 0
		if _, err := f.Write(rest); err != nil {
			return rest, err
		}
	}
	return nil, nil
}

// feedStep is how many bytes Feed copies at a time to complete an event.
const feedStep = 512

// Next returns the next complete event, including its terminating blank line,
// or nil when no complete event is buffered. The slice aliases the Framer's
// buffer and is valid until the next Write.
func (f *Framer) Next() []byte {
	ev, _ := f.next(false)
	return ev
}

// Flush is Next at end of stream: a trailing "\r" then counts as a complete
// line ending, since no "\n" can follow it.
func (f *Framer) Flush() []byte {
	ev, _ := f.next(true)
	return ev
}

// next returns the next complete event and the index in it of its first
// line's terminator, or nil.
func (f *Framer) next(eof bool) ([]byte, int) {
	end, ok := f.findEnd(eof)
	if !ok {
		return nil, 0
	}
	ev, eol := f.buf[f.start:end], f.eol-1
	f.start, f.scan, f.eol, f.lineS = end, end, 0, true
	return ev, eol
}

// Rest returns the buffered bytes of an unterminated event (the final event of
// a stream that did not end with a blank line) and empties the Framer.
func (f *Framer) Rest() []byte {
	r := f.buf[f.start:]
	f.buf, f.start, f.scan, f.eol, f.lineS, f.cr = f.buf[:0], 0, 0, 0, true, 0
	return r
}

// Cap reports the capacity of the Framer's buffer, for a caller that
// recycles Framers to leave a grown one to the GC.
func (f *Framer) Cap() int { return cap(f.buf) }

// Buffered reports how many bytes are pending.
func (f *Framer) Buffered() int { return len(f.buf) - f.start }

// findEnd scans for the end of the pending event. lineS tracks whether the
// scan position is at the start of a line, so resuming a scan is O(new bytes).
func (f *Framer) findEnd(eof bool) (int, bool) {
	b := f.buf
	i := f.scan
	for i < len(b) {
		c := b[i]
		if c != '\n' && c != '\r' {
			// Jump to the next line terminator: most events are one long
			// "data:" line.
			f.lineS = false
			if i = f.nextEOL(i); i < 0 {
				i = len(b)
				break
			}
			continue
		}
		// A line terminator: "\r\n", "\r" or "\n".
		if f.eol == 0 {
			f.eol = 1 + i - f.start
		}
		n := 1
		if c == '\r' {
			if i+1 == len(b) && !eof {
				break // cannot tell "\r" from "\r\n" yet
			}
			if i+1 < len(b) && b[i+1] == '\n' {
				n = 2
			}
		}
		if f.lineS {
			return i + n, true
		}
		f.lineS = true
		i += n
	}
	f.scan = i
	return 0, false
}

// nextEOL returns the index in buf of the first '\n' or '\r' from i, or -1.
// It may also return the index of another byte, where its last search for
// '\r' ended (the buffer has grown since): the caller, seeing no
// terminator there, asks again from that index.
func (f *Framer) nextEOL(i int) int {
	b := f.buf
	lf := len(b)
	if n := bytes.IndexByte(b[i:], '\n'); n >= 0 {
		lf = i + n
	}
	if f.cr < i || f.cr == i && (i == len(b) || b[i] != '\r') {
		f.cr = len(b)
		if n := bytes.IndexByte(b[i:], '\r'); n >= 0 {
			f.cr = i + n
		}
	}
	if end := min(lf, f.cr); end < len(b) {
		return end
	}
	return -1
}
