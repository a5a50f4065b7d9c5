package recorder

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// maxUnpacked bounds what one packed unit may decompress to, so that a
// corrupt or hostile frame cannot make a reader allocate without limit.
// Request bodies are capped at 256 MB by the proxy.
const maxUnpacked = 1 << 30

// The zstd coders are shared by every caller: EncodeAll and DecodeAll are
// safe for concurrent use, and building a coder per call costs far more
// than the call itself. The encoder runs at its fastest level: on harness
// requests it is 1.3-1.7x faster than the default level for 5% more bytes,
// and it runs for every recorded call (the proxy's CPU budget).
var (
	zenc = sync.OnceValue(func() *zstd.Encoder {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(false), zstd.WithEncoderConcurrency(2))
		if err != nil {
			panic(fmt.Sprintf("recorder: zstd encoder: %v", err)) // only bad options fail
		}
		return e
	})
	zdec = sync.OnceValue(func() *zstd.Decoder {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(2), zstd.WithDecoderMaxMemory(maxUnpacked), zstd.WithDecodeAllCapLimit(true))
		if err != nil {
			panic(fmt.Sprintf("recorder: zstd decoder: %v", err))
		}
		return d
	})
)

// Pack appends to dst one zstd frame holding a call document and the new
// blocks that came with it. Compressing them together lets the blocks of a
// turn share one frame's dictionary. Backends that store blocks separately
// can ignore Pack and compress as they see fit.
func Pack(dst, docBytes []byte, blocks []Block) []byte {
	size := len(docBytes) + 16
	for _, b := range blocks {
		size += len(b.Data) + 24
	}
	pb := packBufs.Get().(*[]byte)
	w := wbuf{b: slices.Grow((*pb)[:0], size)}
	w.bytes(docBytes)
	w.uvarint(uint64(len(blocks)))
	for _, b := range blocks {
		w.hash(b.Hash)
		w.bytes(b.Data)
	}
	dst = zenc().EncodeAll(w.b, dst)
	if cap(w.b) <= 1<<20 { // a huge one goes to the GC
		*pb = w.b
		packBufs.Put(pb)
	}
	return dst
}

// packBufs recycles Pack's uncompressed staging buffers.
var packBufs = sync.Pool{New: func() any { return new([]byte) }}

// docBufs recycles call documents (see ReleaseDoc). A vLLM response's
// document holds its choices, tens of KB per call.
var docBufs = sync.Pool{New: func() any { return new([]byte) }}

func docBuf(size int) []byte {
	return slices.Grow((*docBufs.Get().(*[]byte))[:0], size)
}

// ReleaseDoc hands back a document that [EpisodeEncoder.Encode] returned,
// once nothing reads it any more (after [Pack]), for a later Encode to
// reuse. Not calling it is fine: the GC takes the document.
func ReleaseDoc(doc []byte) {
	if cap(doc) == 0 || cap(doc) > 1<<20 { // a huge one goes to the GC
		return
	}
	doc = doc[:0]
	docBufs.Put(&doc)
}

// Unpack reverses [Pack]. The returned slices alias one fresh buffer.
// Blocks whose bytes do not match their hash are rejected.
func Unpack(packed []byte) (docBytes []byte, blocks []Block, err error) {
	raw, err := decompress(packed)
	if err != nil {
		return nil, nil, fmt.Errorf("decompress: %w: %w", ErrCorrupt, err)
	}
	r := rbuf{b: raw}
	docBytes = r.bytes("document")
	n := r.count("blocks", 17)
	blocks = make([]Block, 0, n)
	for range n {
		b := Block{Hash: r.hash("block hash"), Data: r.bytes("block")}
		if r.err == nil && HashBlock(b.Data) != b.Hash {
			return nil, nil, fmt.Errorf("block %s: content does not match its hash: %w", b.Hash, ErrCorrupt)
		}
		blocks = append(blocks, b)
	}
	if r.err == nil && len(r.b) != 0 {
		return nil, nil, fmt.Errorf("%d bytes after the blocks: %w", len(r.b), ErrCorrupt)
	}
	if r.err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrCorrupt, r.err)
	}
	return docBytes, blocks, nil
}

// maxRatio bounds how much a valid zstd frame can expand: a block yields at
// most 128 KiB and takes at least 4 bytes (an RLE block).
const maxRatio = 128 << 10 / 4

// decompress decodes one zstd unit. It allocates the size the frame header
// declares only when the frame is long enough to hold that much, and
// otherwise grows its buffer only while data really decodes, so that a
// corrupt header claiming a huge size cannot make it allocate that size.
func decompress(packed []byte) ([]byte, error) {
	var h zstd.Header
	if err := h.Decode(packed); err != nil {
		return nil, err
	}
	if h.HasFCS {
		if h.FrameContentSize > maxUnpacked || h.FrameContentSize > uint64(len(packed))*maxRatio {
			return nil, fmt.Errorf("frame claims %d bytes from %d", h.FrameContentSize, len(packed))
		}
		return zdec().DecodeAll(packed, make([]byte, 0, h.FrameContentSize))
	}
	limit := 8*len(packed) + 64<<10
	for {
		limit = min(limit, maxUnpacked)
		out, err := zdec().DecodeAll(packed, make([]byte, 0, limit))
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) && limit < maxUnpacked {
			limit *= 4
			continue
		}
		return out, err
	}
}

// MarshalCall returns a self-contained encoding of c (a document without
// dedup, zstd-compressed) that [UnmarshalCall] turns back into an equal call
// with byte-identical Request, Response and Usage. The pipeline's spill file
// uses it; it needs no episode state.
func MarshalCall(c *Call) ([]byte, error) {
	d, _, err := NewEpisodeEncoder(false).Encode(c)
	if err != nil {
		return nil, err
	}
	out := Pack(nil, d, nil)
	ReleaseDoc(d)
	return out, nil
}

// UnmarshalCall decodes what [MarshalCall] returned.
func UnmarshalCall(b []byte) (*Call, error) {
	d, blocks, err := Unpack(b)
	if err != nil {
		return nil, err
	}
	if len(blocks) != 0 {
		return nil, fmt.Errorf("self-contained call with %d blocks: %w", len(blocks), ErrCorrupt)
	}
	return NewEpisodeDecoder().Decode(d, func(BlockHash) ([]byte, bool) { return nil, false })
}
