package proxy

import (
	"bytes"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/orchard-rl/orchard/internal/jsonscan"
	"github.com/orchard-rl/orchard/internal/sse"
	"github.com/orchard-rl/orchard/proxy/assemble"
)

// stripRules say what the proxy added to a request and must therefore take
// out of the streamed response, so the client sees what it asked for.
type stripRules struct {
	// usage: the proxy set stream_options.include_usage; drop the final
	// usage-only chunk.
	usage bool
	// nullUsage: also delete the "usage":null that OpenAI adds to every
	// chunk only when include_usage is set. vLLM's chat chunks never carry
	// it and its completions chunks carry it either way, so it stays there:
	// a chunk shaped like vLLM's or SGLang's (see serverShaped) keeps it
	// even when the upstream was configured or detected as openai.
	nullUsage bool
	// continuous: the client set stream_options.continuous_usage_stats
	// without include_usage, which vLLM ignores unless include_usage is set
	// (should_include_usage in its serving code); the injected include_usage
	// makes it put usage on every chunk, which goes back to what the chunk
	// had without it: null in completions (dumped with exclude_unset=False),
	// no key in chat (usageNull false). SGLang puts usage on every chunk
	// for continuous_usage_stats alone, so it gets no such rule.
	continuous bool
	usageNull  bool
	// fields the proxy asked for (token ids, logprobs) and must take out:
	// at the top level of a chunk or response, or in every choice. The
	// upstream renders a field nobody asked for either as null (vLLM,
	// which writes explicitly passed fields even when unset) or not at all
	// (SGLang's per-choice ids), and so does the stripper; the assembler
	// shows them in the record the same way (Streamer.Hide).
	fields []assemble.Unseen
}

func (s stripRules) any() bool { return s.usage || len(s.fields) > 0 }

// stripper rewrites an SSE body event by event. Events it does not need to
// change pass through as the exact bytes received; only events that carry
// an injected field are re-serialised. If an event grows past the framer's
// limit it gives up and passes the rest through untouched.
//
// It reads the upstream into its caller's buffer (the ReverseProxy's 32
// KiB) and frames the events there, in place: the framer keeps only an
// event split between two reads, and the stripper holds no read buffer of
// its own, so a stream costs one output buffer, not three buffers of a
// read's size.
type stripper struct {
	src   io.ReadCloser
	rules stripRules
	f     *sse.Framer
	buf   []byte // read buffer, only for callers whose buffer is small
	out   []byte
	outp  *[]byte // holds out in outBufs while s waits (see giveOut)
	off   int
	err   error
	pass  bool
	// asm, when not nil, is fed every upstream event as framed here (and
	// any bytes not framed, as bytes), so that the stream is framed once.
	// A chunk that repeats the assembler's template outside the values
	// that vary is stripped by the assembler in the scan that validates
	// and assembles it (Streamer.ReplayStripped): replays says the
	// template's stripped values were marked.
	asm      *assemble.Streamer
	replays  bool
	replayed int // events stripped through the assembler's template
	// gaveUp, when not nil, is set when the stripper gives up.
	gaveUp *bool
	spans  []assemble.Span // scratch: the values an event's edits null
	edits  []edit          // scratch: an event's edits
}

// strippers recycles a stripper's framer and the read buffer of a
// small-buffered caller across streams.
var strippers = sync.Pool{New: func() any { return &stripper{f: sse.NewFramer(0)} }}

// outBufs holds buffers of a read's worth of a response on its way to the
// client: the output buffers of strippers that are waiting for the
// upstream, and the bursts connections gather (see gatherConn). A
// stripper's output grows to what one read yields (up to the caller's 32
// KiB and more), and a stream spends most of its life waiting for the next
// read with that buffer drained: handing it over while it waits makes the
// buffers in use as many as the streams being stripped at that moment, not
// as many as there are streams.
var outBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledOut is the largest buffer outBufs keeps.
const maxPooledOut = 256 << 10

// takeOut gives s an empty output buffer: one a waiting stripper handed
// over, or none yet (the first event's append makes one).
func (s *stripper) takeOut() {
	if s.out == nil {
		s.outp = outBufs.Get().(*[]byte)
		s.out, *s.outp = (*s.outp)[:0], nil // the holder keeps no buffer s may outgrow
	}
}

// minStripRead is the smallest caller buffer the stripper reads into; a
// caller with a smaller one gets reads of this size through the
// stripper's own buffer, so that it does not read the upstream a few bytes
// at a time.
const minStripRead = 4 << 10

func newStripper(src io.ReadCloser, r stripRules, asm *assemble.Streamer) *stripper {
	s := strippers.Get().(*stripper)
	s.src, s.rules, s.asm = src, r, asm
	return s
}

func (s *stripper) Read(p []byte) (int, error) {
	for s.off >= len(s.out) {
		if s.err != nil {
			s.giveOut()
			return 0, s.err
		}
		s.giveOut() // drained (or none yet)
		buf := s.readBuf(p)
		n, err := s.src.Read(buf)
		s.takeOut()
		if n > 0 {
			s.feed(buf[:n])
		}
		if err != nil {
			if !s.pass {
				if err == io.EOF {
					for ev := s.f.Flush(); ev != nil; ev = s.f.Flush() {
						s.out = s.event(s.out, ev, -1)
					}
				}
				// An unterminated tail goes out as received.
				rest := s.f.Rest()
				s.out = append(s.out, rest...)
				s.assemble(rest)
			}
			s.err = err
		}
	}
	n := copy(p, s.out[s.off:])
	if s.off += n; s.off == len(s.out) {
		s.giveOut() // drained: not held while the caller writes p out
	}
	return n, nil
}

// giveOut hands s's drained output buffer to a later Read, of s or of
// another stream, while s waits for the upstream.
func (s *stripper) giveOut() {
	out := s.out[:0]
	s.out, s.off = nil, 0
	if cap(out) == 0 || cap(out) > maxPooledOut {
		return
	}
	if s.outp == nil {
		s.outp = new([]byte)
	}
	*s.outp = out
	outBufs.Put(s.outp)
	s.outp = nil
}

// readBuf is the buffer the next upstream read goes into: the caller's,
// which is free until the stripped output is copied into it, when it is
// big enough.
func (s *stripper) readBuf(p []byte) []byte {
	if len(p) >= minStripRead {
		return p
	}
	if s.buf == nil {
		s.buf = make([]byte, minStripRead)
	}
	return s.buf
}

// feed frames p and strips its events into s.out. The events are framed in
// p where they are whole, so nothing may keep them past the call.
func (s *stripper) feed(p []byte) {
	if s.pass {
		s.out = append(s.out, p...)
		s.assemble(p)
		return
	}
	unfed, err := s.f.Feed(p, s.emit)
	if err != nil {
		s.pass = true
		if s.gaveUp != nil {
			*s.gaveUp = true
		}
		rest := s.f.Rest()
		s.out = append(s.out, rest...)
		s.out = append(s.out, unfed...)
		s.assemble(rest)
		s.assemble(unfed)
	}
}

// emit strips one framed event into s.out; lineEnd is where its first line
// ends.
func (s *stripper) emit(ev []byte, lineEnd int) { s.out = s.event(s.out, ev, lineEnd) }

// Close closes the upstream body and recycles the stripper; the
// ReverseProxy reads nothing after Close.
func (s *stripper) Close() error {
	// A partial event still framed goes to the assembler before the tee's
	// Close ends the exchange (the client left mid-stream).
	s.assemble(s.f.Rest())
	err := s.src.Close()
	s.giveOut()
	*s = stripper{f: s.f, buf: s.buf, spans: s.spans[:0], edits: s.edits[:0]}
	strippers.Put(s)
	return err
}

// event appends ev to dst with the injected fields removed, and feeds it
// to the assembler: through the assembler's template when ev repeats it,
// else by looking the fields up (and telling the assembler which values
// they were, should ev become its template).
func (s *stripper) event(dst, ev []byte, lineEnd int) []byte {
	start, end := dataJSON(ev, lineEnd)
	if start < 0 {
		s.assembleEvent(ev)
		return append(dst, ev...)
	}
	base := len(dst)
	dst = append(dst, ev[:start]...)
	data := ev[start:end]
	if s.replays {
		if out, ok := s.asm.ReplayStripped(dst, ev, data); ok {
			s.replayed++
			return append(out, ev[end:]...)
		}
	}
	d := chunkDoc{data: data}
	if s.asm != nil {
		d.members, d.known = s.asm.EventMembers(ev, data)
	}
	edits, drop := s.rules.plan(d, true, s.edits[:0])
	s.edits = edits
	if drop {
		s.replays = false
		return dst[:base] // the usage-only chunk the client did not ask for
	}
	s.replays = s.asm != nil && s.markStripped(data, edits)
	dst = appendEdited(dst, data, edits)
	return append(dst, ev[end:]...)
}

// markStripped tells the assembler which values of data the edits null;
// a key deletion it cannot replay.
func (s *stripper) markStripped(data []byte, edits []edit) bool {
	s.spans = s.spans[:0]
	for _, e := range edits {
		if e.at < 0 {
			return false
		}
		s.spans = append(s.spans, assemble.Span{Start: e.at, End: e.at + e.n})
	}
	return s.asm.MarkStripped(data, s.spans)
}

// assembleEvent hands one framed event to the assembler.
func (s *stripper) assembleEvent(ev []byte) {
	if s.asm != nil {
		s.asm.Event(ev)
	}
}

// assemble hands bytes the framer did not frame to the assembler.
func (s *stripper) assemble(p []byte) {
	if s.asm != nil && len(p) > 0 {
		s.asm.Write(p)
	}
}

// rewrite removes the injected fields from one JSON chunk or body. In a
// stream, it reports whether the chunk exists only because of injection.
func (r stripRules) rewrite(data []byte, chunk bool) ([]byte, bool) {
	return r.appendRewritten(nil, data, chunk)
}

// appendRewritten appends data with the injected fields removed to dst.
func (r stripRules) appendRewritten(dst, data []byte, chunk bool) ([]byte, bool) {
	edits, drop := r.plan(chunkDoc{data: data}, chunk, nil)
	if drop {
		return dst, true
	}
	return appendEdited(dst, data, edits), false
}

// plan appends to edits those that remove the injected fields from data,
// or reports that the whole chunk is to be dropped.
func (r stripRules) plan(d chunkDoc, chunk bool, edits []edit) ([]edit, bool) {
	if r.usage && chunk {
		u := d.get("usage")
		switch {
		case !u.Exists():
		case u.Type == gjson.Null:
			if r.nullUsage && !serverShaped(d) {
				edits = append(edits, edit{at: -1, path: "usage"})
			}
		case d.get("choices.#").Int() == 0:
			return nil, true
		case r.continuous && r.usageNull && u.Index > 0:
			edits = append(edits, edit{at: u.Index, n: len(u.Raw)})
		case r.continuous:
			edits = append(edits, edit{at: -1, path: "usage"})
		}
	}
	if len(r.fields) == 0 {
		return edits, false
	}
	n := int(d.get("choices.#").Int())
	for _, f := range r.fields {
		if !f.PerChoice {
			edits = find(f, d, f.Name, edits)
			continue
		}
		for i := range n {
			edits = find(f, d, "choices."+strconv.Itoa(i)+"."+f.Name, edits)
		}
	}
	return edits, false
}

// chunkDoc is a chunk or body whose members plan looks up: by path with
// gjson, or, when the assembler validated it on the way (known), through
// its top-level members, so that each lookup reads one member's value
// instead of the chunk up to it. A vLLM stream's first chunk carries the
// whole prompt's ids, which every lookup of a member after them, or of one
// the chunk lacks (usage), read again.
type chunkDoc struct {
	data    []byte
	members []jsonscan.Member // extents in data, in order
	known   bool
}

// get is gjson.Get(data, path), whose answer's Raw aliases data. Like
// gjson, it takes the first member of the name, or for a longer path the
// first of the name in which the rest of the path is found (a key can
// repeat).
func (d chunkDoc) get(path string) gjson.Result {
	if !d.known {
		return lookup(d.data, path)
	}
	name, rest, _ := strings.Cut(path, ".")
	for _, m := range d.members {
		key := d.data[m.Key.Start+1 : m.Key.End-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			return lookup(d.data, path) // gjson compares keys unescaped
		}
		if string(key) != name {
			continue
		}
		v := unsafe.String(unsafe.SliceData(d.data[m.Value.Start:]), m.Value.End-m.Value.Start)
		if rest == "" {
			r := gjson.Parse(v)
			r.Index = m.Value.Start
			return r
		}
		if r := gjson.Get(v, rest); r.Exists() {
			if r.Index > 0 {
				r.Index += m.Value.Start
			}
			return r
		}
	}
	return gjson.Result{}
}

// lookup is gjson.GetBytes without its copy of the value: the result's Raw
// aliases data, and the edits keep only its offset and length. A vLLM
// stream's first chunk carries the prompt's ids, kilobytes that
// GetBytes copied to find where they are.
func lookup(data []byte, path string) gjson.Result {
	return gjson.Get(unsafe.String(unsafe.SliceData(data), len(data)), path)
}

// serverShaped reports whether a chunk's first choice has a field only
// vLLM (stop_reason) or SGLang (matched_stop) writes: such a server sends
// its "usage":null whether or not include_usage was asked for.
func serverShaped(d chunkDoc) bool {
	c := d.get("choices.0")
	return c.Get("stop_reason").Exists() || c.Get("matched_stop").Exists()
}

// edit replaces data[at:at+n] with null, or deletes the key at path.
type edit struct {
	at, n int
	path  string // set for deletions
}

// find notes the edit that strips f's value at path, if there is one.
func find(f assemble.Unseen, d chunkDoc, path string, edits []edit) []edit {
	v := d.get(path)
	switch {
	case !v.Exists():
	case f.Remove:
		edits = append(edits, edit{at: -1, path: path})
	case v.Type != gjson.Null && v.Index > 0:
		edits = append(edits, edit{at: v.Index, n: len(v.Raw)})
	}
	return edits
}

// appendEdited appends data to dst with every value edit replaced by null
// (gjson's Index gives the raw value's offset, so no JSON is re-encoded),
// then performs the rare key deletions (SGLang) with sjson.
func appendEdited(dst, data []byte, edits []edit) []byte {
	if len(edits) == 0 {
		return append(dst, data...)
	}
	slices.SortFunc(edits, func(a, b edit) int { return a.at - b.at })
	base := len(dst)
	out := dst
	last := 0
	var dels []string
	for _, e := range edits {
		if e.at < 0 {
			dels = append(dels, e.path)
			continue
		}
		if e.at < last {
			continue // overlapping: cannot happen for distinct fields
		}
		out = append(out, data[last:e.at]...)
		out = append(out, "null"...)
		last = e.at + e.n
	}
	out = append(out, data[last:]...)
	if len(dels) > 0 {
		edited := bytes.Clone(out[base:])
		for _, p := range dels {
			edited = del(edited, p)
		}
		out = append(out[:base], edited...)
	}
	return out
}

func del(data []byte, path string) []byte {
	if d, err := sjson.DeleteBytes(data, path); err == nil {
		return d
	}
	return data
}

// dataJSON finds the JSON object of a single-line `data:` event, or -1.
// lineEnd is the index of ev's first line terminator when the framer told
// it (see sse.Framer.Feed), else -1: with it, the usual event, one data
// line, is not scanned again.
func dataJSON(ev []byte, lineEnd int) (int, int) {
	i := 0 // the usual event is one data line
	if !bytes.HasPrefix(ev, []byte("data:")) {
		lineEnd = -1 // not the data line's end
		i = bytes.Index(ev, []byte("data:"))
		if i < 0 || (i > 0 && ev[i-1] != '\n' && ev[i-1] != '\r') {
			return -1, -1
		}
	}
	start := i + 5
	for start < len(ev) && ev[start] == ' ' {
		start++
	}
	if start >= len(ev) || ev[start] != '{' {
		return -1, -1
	}
	end := lineEnd // the first line's end, after start: "{" is not a terminator
	if end < 0 {
		end = lineEndFrom(ev, start)
	}
	if ev[end-1] != '}' {
		return -1, -1
	}
	return start, end
}

// lineEndFrom returns the index of the first CR or LF in ev from start,
// or len(ev).
func lineEndFrom(ev []byte, start int) int {
	end := bytes.IndexByte(ev[start:], '\n')
	line := ev[start:] // a CR before the LF ends the line earlier
	if end >= 0 {
		line = line[:end]
	}
	if r := bytes.IndexByte(line, '\r'); r >= 0 {
		end = r
	}
	if end < 0 {
		return len(ev)
	}
	return end + start
}
