package recorder

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/internal/jsonout"
	"github.com/orchard-rl/orchard/internal/jsonscan"
)

// A call's metadata (every field but the bodies, usage and prompt ids) is
// JSON whose values mostly repeat from call to call: schema, api, model,
// upstream, harness. A document with a base stores only the top-level keys
// whose raw value differs from the base's, and the keys it lacks.

// metaMap is metadata split into top-level members (raw JSON values),
// sorted by key, each key once. A slice rather than a Go map: an encoder
// keeps one per remembered call, and at hundreds of idle episodes a map
// each was a sixth of the proxy's live heap; sorted, a delta against a base
// is one merge, in the order the document stores it.
type metaMap []metaKV

type metaKV struct{ k, v string }

// newMetaMap sorts kvs by key in place and keeps the last of each key, as
// repeated keys of one object decode.
func newMetaMap(kvs []metaKV) metaMap {
	slices.SortStableFunc(kvs, func(a, b metaKV) int { return strings.Compare(a.k, b.k) })
	out := kvs[:0]
	for i, kv := range kvs {
		if i+1 < len(kvs) && kvs[i+1].k == kv.k {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// get returns the value of key k.
func (m metaMap) get(k string) (string, bool) {
	i, ok := slices.BinarySearchFunc(m, k, func(kv metaKV, k string) int { return strings.Compare(kv.k, k) })
	if !ok {
		return "", false
	}
	return m[i].v, true
}

func parseMeta(meta []byte) (metaMap, error) {
	g := gjson.ParseBytes(meta) // a copy: the map keeps strings of it
	// jsonscan accepts nothing encoding/json rejects (its FuzzValid) and is
	// several times faster; this runs for every call the store writes.
	if !(jsonscan.Valid(meta) || json.Valid(meta)) || !g.IsObject() {
		return nil, fmt.Errorf("metadata is not a JSON object: %w", ErrCorrupt)
	}
	m := metaMap{}
	g.ForEach(func(k, v gjson.Result) bool {
		m = append(m, metaKV{k.Str, v.Raw})
		return true
	})
	return newMetaMap(m), nil
}

// parseOwnMeta is parseMeta for metadata marshalMeta just made, so valid
// JSON whose keys are struct tags: one jsonscan pass over it, without
// validating it first or gjson scanning each value (the token ids and
// logprobs) to find its end, which made parsing cost twice marshalling.
// It falls back to parseMeta on anything else. The map's strings alias
// meta, which nothing writes to once marshalled (a copy doubled the
// metadata held by each queued call and each remembered base).
func parseOwnMeta(meta []byte) (metaMap, error) {
	ms := unsafe.String(unsafe.SliceData(meta), len(meta))
	i := jsonscan.SkipSpace(meta, 0)
	if i >= len(meta) || meta[i] != '{' {
		return parseMeta(meta)
	}
	m := make(metaMap, 0, 24)
	i = jsonscan.SkipSpace(meta, i+1)
	if i < len(meta) && meta[i] == '}' {
		return m, nil
	}
	for {
		if i >= len(meta) || meta[i] != '"' {
			return parseMeta(meta)
		}
		ke := jsonscan.SkipString(meta, i)
		if ke-i < 2 || meta[ke-1] != '"' || bytes.IndexByte(meta[i:ke], '\\') >= 0 {
			return parseMeta(meta)
		}
		key := ms[i+1 : ke-1]
		i = jsonscan.SkipSpace(meta, ke)
		if i >= len(meta) || meta[i] != ':' {
			return parseMeta(meta)
		}
		vs := jsonscan.SkipSpace(meta, i+1)
		if vs >= len(meta) {
			return parseMeta(meta)
		}
		ve := jsonscan.SkipValue(meta, vs)
		if ve <= vs || ve > len(meta) {
			return parseMeta(meta)
		}
		m = append(m, metaKV{key, ms[vs:ve]})
		i = jsonscan.SkipSpace(meta, ve)
		if i >= len(meta) {
			return parseMeta(meta)
		}
		if meta[i] == '}' {
			break
		}
		if meta[i] != ',' {
			return parseMeta(meta)
		}
		i = jsonscan.SkipSpace(meta, i+1)
	}
	if jsonscan.SkipSpace(meta, i+1) != len(meta) {
		return parseMeta(meta)
	}
	return newMetaMap(m), nil
}

// kept returns m as an encoder keeps it for later calls to delta against:
// sharing the members whose values equal base's (from the call before:
// schema, episode, model, upstream, tokens, ...), with the rest copied
// into one buffer of their own, so that they neither keep the call's
// marshalled metadata alive nor read it once Encode has recycled it.
func (m metaMap) kept(base metaMap) metaMap {
	out := make(metaMap, len(m))
	n, j := 0, 0
	for i, kv := range m {
		if base.sameAt(&j, kv) {
			out[i] = base[j]
			continue
		}
		out[i] = kv
		n += len(kv.k) + len(kv.v)
	}
	buf := make([]byte, 0, n) // never grows: the strings below stay valid
	j = 0
	for i, kv := range out {
		if base.sameAt(&j, kv) {
			continue
		}
		at := len(buf)
		buf = append(append(buf, kv.k...), kv.v...)
		s := unsafe.String(unsafe.SliceData(buf[at:]), len(kv.k)+len(kv.v))
		out[i] = metaKV{s[:len(kv.k)], s[len(kv.k):]}
	}
	return out
}

// sameAt advances *j past m's keys before kv's and reports whether m holds
// kv at *j. Called with kv in key order, it merges kv's map with m.
func (m metaMap) sameAt(j *int, kv metaKV) bool {
	for *j < len(m) && m[*j].k < kv.k {
		*j++
	}
	return *j < len(m) && m[*j] == kv
}

// diff returns the members of m that base lacks or holds differently, and
// the keys of base that m lacks, both sorted by key.
func (m metaMap) diff(base metaMap) (set [][2]string, del []string) {
	i, j := 0, 0
	for i < len(m) || j < len(base) {
		switch {
		case j == len(base) || i < len(m) && m[i].k < base[j].k:
			set = append(set, [2]string{m[i].k, m[i].v})
			i++
		case i == len(m) || base[j].k < m[i].k:
			del = append(del, base[j].k)
			j++
		default:
			if m[i].v != base[j].v {
				set = append(set, [2]string{m[i].k, m[i].v})
			}
			i, j = i+1, j+1
		}
	}
	return set, del
}

// patch returns base with set applied in order and del removed.
func (base metaMap) patch(set [][2]string, del []string) metaMap {
	m := make(metaMap, 0, len(base)+len(set))
	m = append(m, base...)
	for _, kv := range set {
		m = append(m, metaKV{kv[0], kv[1]})
	}
	m = newMetaMap(m) // a set key's value comes after base's: the last wins
	for _, k := range del {
		if i, ok := slices.BinarySearchFunc(m, k, func(kv metaKV, k string) int { return strings.Compare(kv.k, k) }); ok {
			m = slices.Delete(m, i, i+1)
		}
	}
	return m
}

// json returns m as a JSON object with sorted keys.
func (m metaMap) json() []byte {
	out := []byte{'{'}
	for i, kv := range m {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(append(jsonout.String(out, kv.k), ':'), kv.v...)
	}
	return append(out, '}')
}
