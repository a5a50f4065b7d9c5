package recorder

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// errShort is returned when an encoded document ends before a field does.
var errShort = errors.New("truncated")

// wbuf appends the primitives of the binary document format.
type wbuf struct{ b []byte }

func (w *wbuf) byte1(v byte)     { w.b = append(w.b, v) }
func (w *wbuf) uvarint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }
func (w *wbuf) varint(v int64)   { w.b = binary.AppendVarint(w.b, v) }
func (w *wbuf) hash(h BlockHash) { w.b = append(w.b, h[:]...) }
func (w *wbuf) bytes(v []byte)   { w.uvarint(uint64(len(v))); w.b = append(w.b, v...) }
func (w *wbuf) str(v string)     { w.uvarint(uint64(len(v))); w.b = append(w.b, v...) }

// ids appends a token id list: its length plus one (0 for nil, which the
// metadata tells from an empty list), then the ids as varints.
func (w *wbuf) ids(ids []int32) {
	if ids == nil {
		w.uvarint(0)
		return
	}
	w.uvarint(uint64(len(ids)) + 1)
	for _, id := range ids {
		w.varint(int64(id))
	}
}

// floats appends a logprob list: its length, then each float32's bits,
// little-endian.
func (w *wbuf) floats(fs []float32) {
	w.uvarint(uint64(len(fs)))
	for _, f := range fs {
		w.b = binary.LittleEndian.AppendUint32(w.b, math.Float32bits(f))
	}
}

func (w *wbuf) hashes(hs []BlockHash) {
	w.uvarint(uint64(len(hs)))
	for _, h := range hs {
		w.hash(h)
	}
}

// rbuf reads what wbuf wrote. Every read is bounds-checked against the
// remaining input, so garbage yields an error, never a panic or a huge
// allocation; the first error sticks and later reads return zero values.
type rbuf struct {
	b   []byte
	err error
}

func (r *rbuf) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("read %s: %w", what, errShort)
	}
	r.b = nil
}

func (r *rbuf) byte1(what string) byte {
	if len(r.b) < 1 {
		r.fail(what)
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *rbuf) uvarint(what string) uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *rbuf) varint(what string) int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// int32 reads a varint that must fit in an int32 (a token id).
func (r *rbuf) int32(what string) int32 {
	v := r.varint(what)
	if v != int64(int32(v)) {
		r.fail(what)
		return 0
	}
	return int32(v)
}

// ids reads what wbuf.ids wrote.
func (r *rbuf) ids(what string) []int32 {
	v := r.uvarint(what)
	if r.err != nil || v == 0 {
		return nil
	}
	if v-1 > uint64(len(r.b)) { // a varint takes at least a byte
		r.fail(what)
		return nil
	}
	ids := make([]int32, v-1)
	for i := range ids {
		ids[i] = r.int32(what)
	}
	return ids
}

// floats reads what wbuf.floats wrote; an empty list reads as nil.
func (r *rbuf) floats(what string) []float32 {
	n := r.count(what, 4)
	if r.err != nil || n == 0 {
		return nil
	}
	fs := make([]float32, n)
	for i := range fs {
		fs[i] = math.Float32frombits(binary.LittleEndian.Uint32(r.b[4*i:]))
	}
	r.b = r.b[4*n:]
	return fs
}

// fieldKind reads a field kind up to max into f.
func (r *rbuf) fieldKind(f *field, what string, max byte) byte {
	k := r.byte1(what)
	if k > max {
		r.fail(what)
		return fieldArray
	}
	f.whole, f.ids = k == fieldWhole, k == fieldIDs
	return k
}

// count reads a length that announces n items of at least min bytes each,
// rejecting counts the remaining input cannot hold.
func (r *rbuf) count(what string, min int) int {
	v := r.uvarint(what)
	if r.err != nil || v > uint64(len(r.b)/min) {
		r.fail(what)
		return 0
	}
	return int(v)
}

func (r *rbuf) bytes(what string) []byte {
	n := r.count(what, 1)
	if r.err != nil {
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *rbuf) str(what string) string { return string(r.bytes(what)) }

func (r *rbuf) hash(what string) BlockHash {
	var h BlockHash
	if len(r.b) < len(h) {
		r.fail(what)
		return h
	}
	copy(h[:], r.b)
	r.b = r.b[len(h):]
	return h
}

func (r *rbuf) hashes(what string) []BlockHash {
	n := r.count(what, len(BlockHash{}))
	if r.err != nil {
		return nil
	}
	hs := make([]BlockHash, n)
	for i := range hs {
		hs[i] = r.hash(what)
	}
	return hs
}

// small reads a count or offset that must fit comfortably in an int.
func (r *rbuf) small(what string) int {
	v := r.uvarint(what)
	if v > 1<<40 {
		r.fail(what)
		return 0
	}
	return int(v)
}
