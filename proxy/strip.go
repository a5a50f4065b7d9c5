package proxy

import (
	"bytes"
	"io"
	"strconv"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/orchard-rl/orchard/internal/sse"
)

// stripRules say what the proxy added to a request and must therefore take
// out of the streamed response, so the client sees what it asked for.
type stripRules struct {
	// usage: the proxy set stream_options.include_usage; drop the final
	// usage-only chunk.
	usage bool
	// nullUsage: also delete the "usage":null that OpenAI adds to every
	// chunk only when include_usage is set. vLLM's chat chunks never carry
	// it and its completions chunks carry it either way, so it stays there.
	nullUsage bool
	// fields the proxy asked for (token ids, logprobs) and must take out.
	fields []fieldRule
}

// fieldRule removes one injected field: at the top level of a chunk or
// response, or in every choice. The upstream renders a field nobody asked
// for either as null (vLLM, which writes explicitly passed fields even when
// unset) or not at all (SGLang's per-choice ids), and so does the rule.
type fieldRule struct {
	name      string
	perChoice bool
	remove    bool // delete the key; false sets it to null
}

func (s stripRules) any() bool { return s.usage || len(s.fields) > 0 }

// stripper rewrites an SSE body event by event. Events it does not need to
// change pass through as the exact bytes received; only events that carry
// an injected field are re-serialised. If an event grows past the framer's
// limit it gives up and passes the rest through untouched.
type stripper struct {
	src   io.ReadCloser
	rules stripRules
	f     *sse.Framer
	buf   []byte
	out   []byte
	off   int
	err   error
	pass  bool
}

func newStripper(src io.ReadCloser, r stripRules) *stripper {
	return &stripper{src: src, rules: r, f: sse.NewFramer(0), buf: make([]byte, 32<<10)}
}

func (s *stripper) Read(p []byte) (int, error) {
	for s.off >= len(s.out) {
		if s.err != nil {
			return 0, s.err
		}
		s.out, s.off = s.out[:0], 0
		n, err := s.src.Read(s.buf)
		if n > 0 {
			s.feed(s.buf[:n])
		}
		if err != nil {
			if !s.pass {
				if err == io.EOF {
					for ev := s.f.Flush(); ev != nil; ev = s.f.Flush() {
						s.out = s.rules.apply(s.out, ev)
					}
				}
				// An unterminated tail goes out as received.
				s.out = append(s.out, s.f.Rest()...)
			}
			s.err = err
		}
	}
	n := copy(p, s.out[s.off:])
	s.off += n
	return n, nil
}

func (s *stripper) feed(p []byte) {
	if s.pass {
		s.out = append(s.out, p...)
		return
	}
	if _, err := s.f.Write(p); err != nil {
		s.pass = true
		s.out = append(s.out, s.f.Rest()...)
		s.out = append(s.out, p...)
		return
	}
	for ev := s.f.Next(); ev != nil; ev = s.f.Next() {
		s.out = s.rules.apply(s.out, ev)
	}
}

func (s *stripper) Close() error { return s.src.Close() }

// apply appends ev to dst with the injected fields removed.
func (r stripRules) apply(dst, ev []byte) []byte {
	start, end := dataJSON(ev)
	if start < 0 {
		return append(dst, ev...)
	}
	data, drop := r.rewrite(ev[start:end], true)
	if drop {
		return dst // the usage-only chunk the client did not ask for
	}
	dst = append(dst, ev[:start]...)
	dst = append(dst, data...)
	return append(dst, ev[end:]...)
}

// rewrite removes the injected fields from one JSON chunk or body. In a
// stream, it reports whether the chunk exists only because of injection.
func (r stripRules) rewrite(data []byte, chunk bool) ([]byte, bool) {
	if r.usage && chunk {
		u := gjson.GetBytes(data, "usage")
		switch {
		case !u.Exists():
		case u.Type == gjson.Null:
			if r.nullUsage {
				data = del(data, "usage")
			}
		case len(gjson.GetBytes(data, "choices").Array()) == 0:
			return data, true
		}
	}
	if len(r.fields) == 0 {
		return data, false
	}
	n := int(gjson.GetBytes(data, "choices.#").Int())
	for _, f := range r.fields {
		if !f.perChoice {
			data = f.strip(data, f.name)
			continue
		}
		for i := range n {
			data = f.strip(data, "choices."+strconv.Itoa(i)+"."+f.name)
		}
	}
	return data, false
}

func (f fieldRule) strip(data []byte, path string) []byte {
	v := gjson.GetBytes(data, path)
	switch {
	case !v.Exists():
		return data
	case f.remove:
		return del(data, path)
	case v.Type == gjson.Null:
		return data
	}
	if d, err := sjson.SetRawBytes(data, path, []byte("null")); err == nil {
		return d
	}
	return data
}

func del(data []byte, path string) []byte {
	if d, err := sjson.DeleteBytes(data, path); err == nil {
		return d
	}
	return data
}

// dataJSON finds the JSON object of a single-line `data:` event, or -1.
func dataJSON(ev []byte) (int, int) {
	i := bytes.Index(ev, []byte("data:"))
	if i < 0 || (i > 0 && ev[i-1] != '\n' && ev[i-1] != '\r') {
		return -1, -1
	}
	start := i + 5
	for start < len(ev) && ev[start] == ' ' {
		start++
	}
	if start >= len(ev) || ev[start] != '{' {
		return -1, -1
	}
	end := bytes.IndexAny(ev[start:], "\r\n")
	if end < 0 {
		end = len(ev)
	} else {
		end += start
	}
	if ev[end-1] != '}' {
		return -1, -1
	}
	return start, end
}
