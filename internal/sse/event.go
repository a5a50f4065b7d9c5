package sse

import (
	"bytes"
	"iter"
)

// Event is one parsed SSE event.
type Event struct {
	// Raw is the event's bytes exactly as received, including its terminating
	// blank line when there was one.
	Raw []byte
	// Name is the value of the last "event:" field, "" when there was none.
	Name string
	// Data is the values of the "data:" fields joined with "\n".
	Data []byte
	// HasData reports whether any "data:" field was present (Data may still
	// be empty).
	HasData bool
	// ID is the value of the last "id:" field.
	ID string
	// Comments holds each comment line (starting with ':') without its line
	// ending, for example ": ping".
	Comments [][]byte
}

// Parse parses one raw event as returned by [Framer.Next]. Per the WHATWG
// rules a single space after the colon is dropped, a line without a colon is
// a field with an empty value, and unknown fields are ignored. Data aliases raw
// when the event has at most one data line.
func Parse(raw []byte) Event {
	if data, ok := dataOnly(raw); ok {
		return Event{Raw: raw, Data: data, HasData: true}
	}
	return parseLines(raw)
}

// dataOnly returns the data of an event that is one "data:" line and its
// blank line ("data: X\n\n", the shape of every chat and completions
// event), without walking it line by line: this runs for every event the
// proxy records. FuzzParse holds it to parseLines.
func dataOnly(raw []byte) ([]byte, bool) {
	if len(raw) < 7 || string(raw[:5]) != "data:" {
		return nil, false
	}
	d := raw[5 : len(raw)-2]
	if bytes.IndexByte(d, '\n') >= 0 || bytes.IndexByte(d, '\r') >= 0 {
		return nil, false
	}
	return OneDataLine(raw, len(raw)-2)
}

// OneDataLine is dataOnly for an event that [Framer.Feed] framed, given the
// index in it of its first line's terminator, which Feed passes on: when
// that terminator is the one before the blank line that ends the event,
// the event is one line, and it is one "data:" line when it starts so.
// That takes no scan of the data. ok is false for any other event, which
// [Parse] then reads.
func OneDataLine(raw []byte, lineEnd int) (data []byte, ok bool) {
	if lineEnd != len(raw)-2 || len(raw) < 7 || string(raw[:5]) != "data:" || string(raw[lineEnd:]) != "\n\n" {
		return nil, false
	}
	d := raw[5:lineEnd]
	if len(d) > 0 && d[0] == ' ' {
		d = d[1:]
	}
	return d, true
}

// parseLines is Parse for any event: field by field, line by line.
func parseLines(raw []byte) Event {
	ev := Event{Raw: raw}
	var joined []byte
	dataLines := 0
	for line := range lines(raw) {
		if len(line) == 0 {
			continue
		}
		if line[0] == ':' {
			ev.Comments = append(ev.Comments, line)
			continue
		}
		name, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			name, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(name) {
		case "data":
			ev.HasData = true
			dataLines++
			switch dataLines {
			case 1:
				ev.Data = value
			case 2:
				joined = append(append(append(joined, ev.Data...), '\n'), value...)
			default:
				joined = append(append(joined, '\n'), value...)
			}
		case "event":
			ev.Name = string(value)
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				ev.ID = string(value)
			}
		}
	}
	if dataLines > 1 {
		ev.Data = joined
	}
	return ev
}

// lines yields each line of b without its terminator ("\n", "\r\n" or "\r").
func lines(b []byte) iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		for len(b) > 0 {
			i := bytes.IndexAny(b, "\r\n")
			if i < 0 {
				yield(b)
				return
			}
			n := 1
			if b[i] == '\r' && i+1 < len(b) && b[i+1] == '\n' {
				n = 2
			}
			if !yield(b[:i]) {
				return
			}
			b = b[i+n:]
		}
	}
}

// IsBlank reports whether ev carries no field and no comment (a stray
// separator line).
func (ev *Event) IsBlank() bool {
	return !ev.HasData && ev.Name == "" && ev.ID == "" && len(ev.Comments) == 0 &&
		len(bytes.Trim(ev.Raw, "\r\n")) == 0
}

// Events yields the events of a complete SSE body, including a final event
// that lacks its terminating blank line. Blank separator events are skipped.
// A leading UTF-8 byte order mark is ignored. Event fields alias body.
func Events(body []byte) iter.Seq[Event] {
	return func(yield func(Event) bool) {
		body = bytes.TrimPrefix(body, bom)
		f := Framer{buf: body, max: len(body) + 1, lineS: true}
		for {
			raw := f.Flush()
			if raw == nil {
				raw = f.Rest()
				if len(raw) == 0 {
					return
				}
			}
			ev := Parse(raw)
			if ev.IsBlank() {
				continue
			}
			if !yield(ev) {
				return
			}
		}
	}
}

var bom = []byte{0xEF, 0xBB, 0xBF}
