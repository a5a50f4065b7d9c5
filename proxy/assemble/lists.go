package assemble

import (
	"slices"
	"sync"
	"unsafe"
)

// A stream's completion ids, logprobs and texts grow a chunk at a time, by
// doubling: on the load benchmark's token path they allocated 3.5 and 3.3
// KB a request for the 1.5 and 1.6 KB they kept (allocation profiles at 64
// clients). So they grow in buffers that finished streams hand back: when
// its response is assembled (choices.result), a stream keeps exact copies
// of its ids and logprobs, which go on to the record, and gives its
// buffers, and its texts', to later streams.
type listPool[T any] struct{ p sync.Pool }

var (
	idLists   listPool[int32]
	lpLists   listPool[float32]
	textLists listPool[byte]
)

// maxListBytes is the largest buffer a listPool keeps: a completion's ids
// or logprobs up to 2,048 tokens, a text up to 8 KiB. A longer one goes to
// the GC, so that short streams do not each hold a long one's buffer.
const maxListBytes = 8 << 10

// get returns an empty buffer: one a finished stream gave back, or a new
// one with room for n elements.
func (lp *listPool[T]) get(n int) []T {
	if b, ok := lp.p.Get().(*[]T); ok {
		return (*b)[:0]
	}
	return make([]T, 0, n)
}

// put gives s's buffer to a later get; nothing may use s after.
func (lp *listPool[T]) put(s []T) {
	var zero T
	if c := cap(s); c == 0 || c*int(unsafe.Sizeof(zero)) > maxListBytes {
		return
	}
	lp.p.Put(&s)
}

// settle replaces s, grown in a buffer of lp's, with an exact copy, and
// gives the buffer back. A nil s stays nil.
func settle[T any](lp *listPool[T], s []T) []T {
	if s == nil {
		return nil
	}
	out := slices.Clip(append(make([]T, 0, len(s)), s...))
	lp.put(s)
	return out
}
