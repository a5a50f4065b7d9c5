package recorder

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/internal/jsonscan"
)

// A call's metadata (every field but the bodies, usage and prompt ids) is
// JSON whose values mostly repeat from call to call: schema, api, model,
// upstream, harness. A document with a base stores only the top-level keys
// whose raw value differs from the base's, and the keys it lacks.

// metaMap is metadata split into top-level keys and raw JSON values.
type metaMap map[string]string

func parseMeta(meta []byte) (metaMap, error) {
	g := gjson.ParseBytes(meta) // a copy: the map keeps strings of it
	// jsonscan accepts nothing encoding/json rejects (its FuzzValid) and is
	// several times faster; this runs for every call the store writes.
	if !(jsonscan.Valid(meta) || json.Valid(meta)) || !g.IsObject() {
		return nil, fmt.Errorf("metadata is not a JSON object: %w", ErrCorrupt)
	}
	m := metaMap{}
	g.ForEach(func(k, v gjson.Result) bool {
		m[k.Str] = v.Raw
		return true
	})
	return m, nil
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
	m := metaMap{}
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
		m[key] = ms[vs:ve]
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
	return m, nil
}

// metaTokens is the metadata key of a call's completion token ids and
// logprobs: kilobytes per call, and never the same from one call to the
// next.
const metaTokens = "tokens"

// kept returns m as an encoder keeps it for later calls to delta against.
// A call with tokens gets its keys and values copied into one buffer of
// their own (m's alias the call's whole marshalled metadata, which would
// stay reachable through them), except the token value, kept as "", which
// equals no JSON value, so that a later call always sets its own tokens
// rather than repeat a kilobytes-long value only to compare it. A call
// without tokens keeps m: its metadata is about the size of the copy.
func (m metaMap) kept() metaMap {
	if _, ok := m[metaTokens]; !ok {
		return m
	}
	n := 0
	for k, v := range m {
		n += len(k)
		if k != metaTokens {
			n += len(v)
		}
	}
	buf := make([]byte, 0, n) // never grows: the strings below stay valid
	out := make(metaMap, len(m))
	for k, v := range m {
		if k == metaTokens {
			v = ""
		}
		at := len(buf)
		buf = append(append(buf, k...), v...)
		s := unsafe.String(unsafe.SliceData(buf[at:]), len(k)+len(v))
		out[s[:len(k)]] = s[len(k):]
	}
	return out
}

// diff returns the entries of m that base lacks or holds differently, and
// the keys of base that m lacks, both sorted.
func (m metaMap) diff(base metaMap) (set []string, del []string) {
	for k, v := range m {
		if bv, ok := base[k]; !ok || bv != v {
			set = append(set, k)
		}
	}
	for k := range base {
		if _, ok := m[k]; !ok {
			del = append(del, k)
		}
	}
	slices.Sort(set)
	slices.Sort(del)
	return set, del
}

// patch returns base with set applied and del removed.
func (base metaMap) patch(set [][2]string, del []string) metaMap {
	m := make(metaMap, len(base)+len(set))
	for k, v := range base {
		m[k] = v
	}
	for _, kv := range set {
		m[kv[0]] = kv[1]
	}
	for _, k := range del {
		delete(m, k)
	}
	return m
}

// json returns m as a JSON object with sorted keys.
func (m metaMap) json() []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := []byte{'{'}
	for i, k := range keys {
		if i > 0 {
			out = append(out, ',')
		}
		kb, _ := json.Marshal(k) // a string always marshals
		out = append(append(append(out, kb...), ':'), m[k]...)
	}
	return append(out, '}')
}
