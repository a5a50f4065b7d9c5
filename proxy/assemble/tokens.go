package assemble

import (
	"math"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/internal/jsonscan"
	"github.com/orchard-rl/orchard/recorder"
)

// logprobs accumulates a choice's logprobs object across chunks: every array
// field (chat "content"/"refusal"; completions "tokens", "token_logprobs",
// "top_logprobs", "text_offset") is concatenated, other fields merged.
type logprobs struct {
	obj    object
	arrays map[string]*jsonList
	values []float32 // the sampled tokens' logprobs, in order
	seen   bool
	// valuesOnly: the client never saw this choice's logprobs (see
	// Streamer.Hide); only the sampled tokens' logprobs are kept, for the
	// record's tokens, and the response shows the field as null.
	valuesOnly bool
	known      holeElems // during addKnown: v's array elements
}

// jsonList is a JSON array under construction: its elements' raw bytes,
// comma-separated, in a few segments (a chunk's logprob entries are
// appended every chunk; one buffer instead of a copy per entry). Segments
// double in size up to listSegMax and are never copied while the stream
// lasts: a growing single buffer copied every entry about twice more and
// held up to twice the bytes.
type jsonList struct {
	key  string
	segs [][]byte
	size int // bytes in segs
	n    int
}

const (
	listSegMin = 512
	listSegMax = 64 << 10
)

func (j *jsonList) add(raw []byte) {
	need := len(raw) + 1
	if len(j.segs) == 0 || cap(j.segs[len(j.segs)-1])-len(j.segs[len(j.segs)-1]) < need {
		c := listSegMin
		if len(j.segs) > 0 {
			c = min(2*cap(j.segs[len(j.segs)-1]), listSegMax)
		}
		j.segs = append(j.segs, make([]byte, 0, max(c, need)))
	}
	last := &j.segs[len(j.segs)-1]
	if j.n > 0 {
		*last = append(*last, ',')
		j.size++
	}
	*last = append(*last, raw...)
	j.size += len(raw)
	j.n++
}

// appendTo appends the list as a JSON array to b.
func (j *jsonList) appendTo(b []byte) []byte {
	b = append(b, '[')
	for _, s := range j.segs {
		b = append(b, s...)
	}
	return append(b, ']')
}

// missingLogprob stands in for an entry without a logprob (vLLM's floor).
const missingLogprob = -9999.0

// add merges one chunk's logprobs and returns how many sampled-token entries
// it carried. v must be an object (every caller checks). It walks the object
// once, as val.ForEach would, but reads each array's elements as it skips
// them: this runs for every chunk of a stream that carries logprobs, and
// ForEach, SkipValue and Get used to scan each entry up to three times.
func (l *logprobs) add(v val, chat bool) int {
	l.seen = true
	b := v.raw
	n := 0
	for i := 1; ; {
		i = jsonscan.SkipSpace(b, i)
		if i < len(b) && b[i] == ',' {
			i = jsonscan.SkipSpace(b, i+1)
		}
		if i >= len(b) || b[i] == '}' {
			return n
		}
		ke := jsonscan.SkipString(b, i)
		k := val{raw: b[i:ke], Type: gjson.String}
		i = jsonscan.SkipSpace(b, jsonscan.SkipSpace(b, ke)+1) // past the colon
		if b[i] != '[' {
			ve := jsonscan.SkipValue(b, i)
			if !l.valuesOnly {
				if _, isArr := l.arrays[k.text()]; !isArr {
					l.obj.mergeRaw(k, b[i:ve])
				}
			}
			i = ve
			continue
		}
		var c int
		if l.valuesOnly {
			key := k.text()
			i, c = l.addElems(nil, b, i, chat && key == "content", !chat && key == "token_logprobs")
			n += c
			continue
		}
		if l.arrays == nil {
			l.arrays = map[string]*jsonList{}
		}
		lst := l.arrays[k.text()]
		if lst == nil {
			lst = &jsonList{key: k.String()}
			l.arrays[lst.key] = lst
		}
		l.obj.put(lst.key, nullJSON)
		i, c = l.addElems(lst, b, i, chat && lst.key == "content", !chat && lst.key == "token_logprobs")
		n += c
	}
}

// addKnown is add for a v that is strictly valid, with e the elements of
// its array members and their "logprob" members (relative to e.base),
// found when it was validated: an entry is not scanned again.
func (l *logprobs) addKnown(v val, chat bool, e holeElems) int {
	if l.valuesOnly && e.plan != nil {
		return l.addPlanned(v, chat, e)
	}
	l.known = e
	n := l.add(v, chat)
	l.known = holeElems{}
	return n
}

// addPlanned is add, keeping only the logprob values, for a v that matched
// a template's shape: its elements, and which list each is in, are the
// shape's, so the values are read where they are, without a walk of v.
func (l *logprobs) addPlanned(v val, chat bool, e holeElems) int {
	l.seen = true
	want := tokenLogprobsList
	if chat {
		want = contentList
	}
	n := 0
	for k, el := range e.spans {
		if e.plan[k] != want {
			continue
		}
		var lp val
		switch m := el.Member; {
		case !chat:
			lp = val{raw: v.raw[el.Start-e.base : el.End-e.base]}
		case m == jsonscan.Unknown:
			lp = firstLogprob(v.raw, el.Start-e.base)
		case m != jsonscan.Span{}:
			lp = val{raw: v.raw[m.Start-e.base : m.End-e.base]}
		}
		if len(lp.raw) > 0 {
			lp.Type = jsonscan.TypeOf(lp.raw[0])
		}
		l.values = append(l.room(), logprobOf(lp))
		n++
	}
	return n
}

// room returns l.values, with room for a first value when it has none.
func (l *logprobs) room() []float32 {
	if cap(l.values) == 0 {
		return lpLists.get(idRoom)
	}
	return l.values
}

// knownElem returns the element at b[i] if addKnown was told it, its
// "logprob" member's extent then relative to b, or ok false.
func (l *logprobs) knownElem(i int) (e jsonscan.Elem, ok bool) {
	k := &l.known
	for len(k.spans) > 0 && k.spans[0].Start-k.base < i {
		k.spans = k.spans[1:]
	}
	if len(k.spans) == 0 || k.spans[0].Start-k.base != i {
		return e, false
	}
	e = k.spans[0]
	k.spans = k.spans[1:]
	e.Start, e.End = e.Start-k.base, e.End-k.base
	if e.Member != jsonscan.Unknown && e.Member != (jsonscan.Span{}) {
		e.Member.Start, e.Member.End = e.Member.Start-k.base, e.Member.End-k.base
	}
	return e, true
}

// addElems appends the elements of the array at b[i] to lst (unless nil)
// and, for the lists of sampled-token entries (content: each entry's
// "logprob"; tokenLogprobs: the elements themselves), their logprobs to
// l.values. It returns the position after the array and the number of
// logprobs taken.
func (l *logprobs) addElems(lst *jsonList, b []byte, i int, content, tokenLogprobs bool) (int, int) {
	n := 0
	for i++; ; {
		i = jsonscan.SkipSpace(b, i)
		if i < len(b) && b[i] == ',' {
			i = jsonscan.SkipSpace(b, i+1)
		}
		if i >= len(b) || b[i] == ']' {
			return i + 1, n
		}
		e, known := l.knownElem(i)
		end := -1
		if known {
			end = e.End
		}
		switch {
		case content:
			var lp val
			switch {
			case !known:
				end, lp = entryLogprob(b, i)
			case e.Member == jsonscan.Unknown:
				lp = firstLogprob(b, i)
			case e.Member != jsonscan.Span{}:
				lp = val{raw: b[e.Member.Start:e.Member.End], Type: jsonscan.TypeOf(b[e.Member.Start])}
			}
			l.values = append(l.room(), logprobOf(lp))
			n++
		case tokenLogprobs:
			if end < 0 {
				end = jsonscan.SkipValue(b, i)
			}
			l.values = append(l.room(), logprobOf(val{raw: b[i:end], Type: jsonscan.TypeOf(b[i])}))
			n++
		case end < 0:
			end = jsonscan.SkipValue(b, i)
		}
		if lst != nil {
			lst.add(b[i:end])
		}
		i = end
	}
}

// entryLogprob returns the end of the value at b[i] and, when it is an
// object, its first "logprob" member (val.Get's answer), found in the same
// scan.
func entryLogprob(b []byte, i int) (int, val) {
	if b[i] != '{' {
		return jsonscan.SkipValue(b, i), val{}
	}
	var lp val
	found := false
	for i++; ; {
		i = jsonscan.SkipSpace(b, i)
		if i < len(b) && b[i] == ',' {
			i = jsonscan.SkipSpace(b, i+1)
		}
		if i >= len(b) || b[i] == '}' {
			return i + 1, lp
		}
		ke := jsonscan.SkipString(b, i)
		k := val{raw: b[i:ke], Type: gjson.String}
		i = jsonscan.SkipSpace(b, jsonscan.SkipSpace(b, ke)+1)
		ve := jsonscan.SkipValue(b, i)
		if !found && k.is("logprob") {
			lp, found = val{raw: b[i:ve], Type: jsonscan.TypeOf(b[i])}, true
		}
		i = ve
	}
}

// firstLogprob is entryLogprob's val for a valid value, without scanning
// past the member it finds.
func firstLogprob(b []byte, i int) val {
	if b[i] != '{' {
		return val{}
	}
	for i++; ; {
		i = jsonscan.SkipSpace(b, i)
		if i < len(b) && b[i] == ',' {
			i = jsonscan.SkipSpace(b, i+1)
		}
		if i >= len(b) || b[i] == '}' {
			return val{}
		}
		ke := jsonscan.SkipString(b, i)
		k := val{raw: b[i:ke], Type: gjson.String}
		i = jsonscan.SkipSpace(b, jsonscan.SkipSpace(b, ke)+1)
		ve := jsonscan.SkipValue(b, i)
		if k.is("logprob") {
			return val{raw: b[i:ve], Type: jsonscan.TypeOf(b[i])}
		}
		i = ve
	}
}

// logprobOf returns a sampled token's logprob as a float32, the precision
// engines compute it in, so the float32 nearest to what they sent is the
// value they computed.
func logprobOf(v val) float32 {
	if v.Type == gjson.Number {
		if f, ok := float32Of(v.raw); ok {
			return f // finite: float32Of answers only inside float32's range
		}
	}
	f := float32(v.Float())
	if v.Type != gjson.Number || math.IsInf(float64(f), 0) || math.IsNaN(float64(f)) {
		return missingLogprob // also for 1e999 and -1e300, which encoding/json cannot write back as float32
	}
	return f
}

// size is about the length of l rendered.
func (l *logprobs) size() int {
	n := l.obj.size()
	for _, lst := range l.arrays {
		n += lst.size
	}
	return n
}

// appendTo appends l rendered as compact JSON to b.
func (l *logprobs) appendTo(b []byte) []byte {
	return l.obj.appendTo(b, func(b []byte, k string) ([]byte, bool) {
		if lst := l.arrays[k]; lst != nil {
			return lst.appendTo(b), true
		}
		return b, false
	})
}

// choiceTokens is the token data of one choice.
type choiceTokens struct {
	index    int64
	ids      idList
	lps      []float32
	mismatch string
}

func (ch *choice) tokens() choiceTokens {
	return choiceTokens{index: ch.index, ids: ch.ids, lps: ch.lp.values, mismatch: ch.mismatch}
}

// buildTokens assembles recorder.Tokens, or nil when the upstream sent no ids.
// Logprobs that do not align one-to-one with the ids are dropped and the
// disagreement is reported in Mismatch, so ids are never misaligned.
// completion is usage.completion_tokens (-1 if unknown), checked against the
// number of ids when every choice carried ids.
func buildTokens(prompt idList, chs []choiceTokens, completion int64) *recorder.Tokens {
	any := prompt.seen
	for _, c := range chs {
		any = any || c.ids.seen
	}
	if !any {
		return nil
	}
	t := &recorder.Tokens{PromptIDs: orEmpty(prompt.ids), CompletionIDs: []int32{}}
	var notes []string
	total, allSeen := int64(0), len(chs) > 0
	for j, c := range chs {
		ids, lps := orEmpty(c.ids.ids), c.lps
		if c.mismatch != "" {
			notes = append(notes, c.mismatch)
		}
		if len(lps) > 0 && len(lps) != len(ids) {
			notes = append(notes, "choice "+itoa64(c.index)+": "+itoa(len(ids))+" token ids but "+
				itoa(len(lps))+" logprobs; logprobs dropped")
			lps = nil
		}
		total += int64(len(ids))
		allSeen = allSeen && c.ids.seen
		if j == 0 {
			t.CompletionIDs, t.Logprobs = ids, lps
		}
		if len(chs) > 1 {
			t.Choices = append(t.Choices, recorder.ChoiceTokens{Index: int(c.index), CompletionIDs: ids, Logprobs: lps})
		}
	}
	if allSeen && completion >= 0 && completion != total {
		notes = append(notes, "usage reports "+strconv.FormatInt(completion, 10)+
			" completion tokens but "+strconv.FormatInt(total, 10)+" token ids were sent")
	}
	t.Mismatch = strings.Join(notes, "; ")
	return t
}

func orEmpty(ids []int32) []int32 {
	if ids == nil {
		return []int32{}
	}
	return ids
}

// jsonTokens reads token ids from a non-streaming chat or completions body:
// vLLM's top-level (chat) or per-choice (completions) prompt_token_ids and
// per-choice token_ids, SGLang's per-choice ids or sglext.input_ids/output_ids.
func jsonTokens(root gjson.Result, chat bool) *recorder.Tokens {
	var prompt idList
	if ids, ok := tokenIDs(valOf([]byte(root.Get("prompt_token_ids").Raw))); ok {
		prompt = idList{ids, true}
	} else if ids, ok := tokenIDs(valOf([]byte(root.Get("sglext.input_ids").Raw))); ok {
		prompt = idList{ids, true}
	}
	outs := root.Get("sglext.output_ids").Array()
	var chs []choiceTokens
	root.Get("choices").ForEach(func(pos, c gjson.Result) bool {
		ct := choiceTokens{index: c.Get("index").Int()}
		if ids, ok := tokenIDs(valOf([]byte(c.Get("token_ids").Raw))); ok {
			ct.ids = idList{ids, true}
		} else if p := int(pos.Int()); p < len(outs) {
			if ids, ok := tokenIDs(valOf([]byte(outs[p].Raw))); ok {
				ct.ids = idList{ids, true}
			}
		}
		if ids, ok := tokenIDs(valOf([]byte(c.Get("prompt_token_ids").Raw))); ok && !prompt.seen {
			prompt = idList{ids, true}
		}
		var l logprobs
		if lp := c.Get("logprobs"); lp.IsObject() {
			l.add(valOf([]byte(lp.Raw)), chat)
		}
		ct.lps = l.values
		chs = append(chs, ct)
		return true
	})
	return buildTokens(prompt, chs, completionTokens([]byte(root.Get("usage").Raw)))
}

func itoa(i int) string     { return strconv.Itoa(i) }
func itoa64(i int64) string { return strconv.FormatInt(i, 10) }
