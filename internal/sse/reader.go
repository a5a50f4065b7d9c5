package sse

import (
	"bytes"
	"errors"
	"io"
)

// Reader reads events from an io.Reader. Each returned event owns its bytes
// (they are copied out of the read buffer), so events may be kept.
//
// A Reader is not safe for concurrent use.
type Reader struct {
	r     io.Reader
	f     *Framer
	buf   []byte
	first bool
	err   error
}

// NewReader returns a Reader that reads from r in chunks starting at 8 KiB and
// fails with [ErrTooLarge] on an event longer than max bytes (max <= 0 means
// [DefaultMaxEvent]).
func NewReader(r io.Reader, max int) *Reader {
	return &Reader{r: r, f: NewFramer(max), buf: make([]byte, 8<<10), first: true}
}

// Next returns the next non-blank event. At the end of the stream it returns
// the final unterminated event, if any, and then io.EOF. Read errors other
// than io.EOF are returned after the events completed before them.
func (rd *Reader) Next() (Event, error) {
	for {
		if raw := rd.f.Next(); raw != nil {
			if ev, ok := rd.event(raw); ok {
				return ev, nil
			}
			continue
		}
		if rd.err != nil {
			return rd.finish()
		}
		n, err := rd.r.Read(rd.buf)
		if n > 0 {
			if _, werr := rd.f.Write(rd.buf[:n]); werr != nil {
				rd.err = werr
				return Event{}, werr
			}
			if n == len(rd.buf) && len(rd.buf) < 256<<10 {
				rd.buf = make([]byte, 2*len(rd.buf))
			}
		}
		if err != nil {
			rd.err = err
		}
	}
}

// finish drains what is left once the underlying reader has failed or ended.
func (rd *Reader) finish() (Event, error) {
	if errors.Is(rd.err, ErrTooLarge) {
		return Event{}, rd.err
	}
	for {
		raw := rd.f.Flush()
		if raw == nil {
			raw = rd.f.Rest()
		}
		if len(raw) == 0 {
			return Event{}, rd.err
		}
		if ev, ok := rd.event(raw); ok {
			return ev, nil
		}
	}
}

func (rd *Reader) event(raw []byte) (Event, bool) {
	if rd.first {
		rd.first = false
		raw = bytes.TrimPrefix(raw, bom)
	}
	ev := Parse(bytes.Clone(raw))
	return ev, !ev.IsBlank()
}
