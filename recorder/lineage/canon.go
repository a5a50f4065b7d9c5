package lineage

import (
	"hash/maphash"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// seed keys string hashing for the life of the process. Hashes never leave
// it: only classifications are recorded, so a per-process seed is enough.
var seed = maphash.MakeSeed()

// maxDepth bounds recursion into nested JSON; deeper values hash by their
// raw bytes, so hostile nesting cannot exhaust the stack.
const maxDepth = 64

// hasher accumulates a canonical hash of JSON values: object keys in sorted
// order, strings unescaped, numbers by value, "cache_control" dropped at
// every depth. Two documents that differ only in key order, whitespace,
// escaping or prompt-caching markers hash alike.
type hasher struct{ h uint64 }

func newHasher(tag string) hasher {
	x := hasher{h: chainSeed}
	x.str(tag)
	return x
}

func (x *hasher) word(v uint64) { x.h = round(x.h, v) }

func (x *hasher) str(s string) {
	x.word(maphash.String(seed, s))
	x.word(uint64(len(s)))
}

func (x *hasher) sum() uint64 { return key(x.h, 0) }

// Type tags keep values of different kinds apart.
const (
	tagNull = iota + 1
	tagFalse
	tagTrue
	tagNum
	tagStr
	tagArr
	tagObj
	tagRaw
	tagEnd
)

type member struct {
	k string
	v gjson.Result
}

// value hashes v canonically, skipping object keys listed in skip (and
// "cache_control" always).
func (x *hasher) value(v gjson.Result, depth int, skip ...string) {
	switch v.Type {
	case gjson.Null:
		x.word(tagNull)
	case gjson.False:
		x.word(tagFalse)
	case gjson.True:
		x.word(tagTrue)
	case gjson.Number:
		x.number(v)
	case gjson.String:
		x.word(tagStr)
		x.str(v.Str)
	default:
		switch {
		case depth >= maxDepth:
			x.word(tagRaw)
			x.str(v.Raw)
		case v.IsArray():
			x.word(tagArr)
			v.ForEach(func(_, e gjson.Result) bool {
				x.value(e, depth+1)
				return true
			})
			x.word(tagEnd)
		case v.IsObject():
			x.object(v, depth, skip)
		default:
			x.word(tagRaw)
			x.str(v.Raw)
		}
	}
}

func (x *hasher) object(v gjson.Result, depth int, skip []string) {
	var buf [16]member
	ms := buf[:0]
	v.ForEach(func(k, e gjson.Result) bool {
		if k.Str != "cache_control" && !slices.Contains(skip, k.Str) {
			ms = append(ms, member{k.Str, e})
		}
		return true
	})
	slices.SortStableFunc(ms, func(a, b member) int { return strings.Compare(a.k, b.k) })
	x.word(tagObj)
	for _, m := range ms {
		x.str(m.k)
		x.value(m.v, depth+1)
	}
	x.word(tagEnd)
}

// number hashes a JSON number by value: 1, 1.0 and 1e0 are equal. Integers
// too long for a float64 hash by their digits.
func (x *hasher) number(v gjson.Result) {
	x.word(tagNum)
	raw := v.Raw
	if !strings.ContainsAny(raw, ".eE") && len(raw) > 15 {
		if i, err := strconv.ParseInt(raw, 10, 64); err == nil {
			x.word(uint64(i))
			return
		}
		x.str(raw)
		return
	}
	f := v.Num
	if f == 0 {
		f = 0 // -0 == 0
	}
	x.word(math.Float64bits(f))
}

// jsonString hashes a string that holds JSON (tool-call arguments) by the
// value it encodes, so re-serialised arguments compare equal; an empty
// string counts as {} and anything not valid JSON hashes as text.
func (x *hasher) jsonString(s string) {
	t := strings.TrimSpace(s)
	switch {
	case t == "":
		x.word(tagObj)
		x.word(tagEnd)
	case gjson.Valid(t):
		x.value(gjson.Parse(t), 1)
	default:
		x.word(tagStr)
		x.str(s)
	}
}
