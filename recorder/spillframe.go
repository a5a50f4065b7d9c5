package recorder

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
)

// Spill frames. A frame is spillMagic, the payload length (4 bytes, little
// endian), the CRC-32C of length and payload (4 bytes), then the payload
// (MarshalCall bytes). The magic lets a reader find the next frame after a
// damaged one; the CRC tells a real frame from a payload that happens to
// hold the magic. Files written before the magic existed hold legacy frames
// (length, CRC-32C of the payload, payload), which are still read: the
// magic read as a legacy length is over spillFrameMax, so the two never
// mix up.
var spillMagic = [4]byte{0xa7, 's', 'p', 0xf1}

const (
	spillHeader       = 12
	legacySpillHeader = 8
	// spillFrameMax bounds one spilled call; a larger length is damage.
	spillFrameMax = 1 << 30
)

var spillCRC = crc32.MakeTable(crc32.Castagnoli)

// appendSpillFrame appends payload to dst as one frame.
func appendSpillFrame(dst, payload []byte) []byte {
	dst = append(dst, spillMagic[:]...)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(payload)))
	crc := crc32.Update(0, spillCRC, dst[len(dst)-4:])
	dst = binary.LittleEndian.AppendUint32(dst, crc32.Update(crc, spillCRC, payload))
	return append(dst, payload...)
}

// spillFrameAt reads the frame at off of r, whose size is size. It returns
// the payload and the frame's length on disk, or ok false when no whole,
// valid frame starts at off.
func spillFrameAt(r io.ReaderAt, off, size int64) (payload []byte, n int64, ok bool) {
	var hdr [spillHeader]byte
	h := hdr[:min(int64(spillHeader), size-off)]
	if len(h) < legacySpillHeader {
		return nil, 0, false
	}
	if _, err := r.ReadAt(h, off); err != nil {
		return nil, 0, false
	}
	if [4]byte(h[:4]) == spillMagic {
		if len(h) < spillHeader {
			return nil, 0, false
		}
		p, ok := readChecked(r, off+spillHeader, size, binary.LittleEndian.Uint32(h[4:8]), binary.LittleEndian.Uint32(h[8:12]), h[4:8])
		return p, spillHeader + int64(len(p)), ok
	}
	p, ok := readChecked(r, off+legacySpillHeader, size, binary.LittleEndian.Uint32(h[:4]), binary.LittleEndian.Uint32(h[4:8]), nil)
	return p, legacySpillHeader + int64(len(p)), ok
}

// readChecked reads n payload bytes at off and checks them against crc,
// computed over prefix and the payload.
func readChecked(r io.ReaderAt, off, size int64, n, crc uint32, prefix []byte) ([]byte, bool) {
	if n > spillFrameMax || off+int64(n) > size {
		return nil, false
	}
	p := make([]byte, n)
	if _, err := r.ReadAt(p, off); err != nil {
		return nil, false
	}
	return p, crc32.Update(crc32.Update(0, spillCRC, prefix), spillCRC, p) == crc
}

// nextSpillFrame returns the offset of the first valid frame with the magic
// after off, or -1 when there is none: resynchronisation past damage.
func nextSpillFrame(r io.ReaderAt, off, size int64) int64 {
	const chunk = 256 << 10
	buf := make([]byte, chunk+len(spillMagic)-1)
	for pos := off + 1; pos < size; pos += chunk {
		n, _ := r.ReadAt(buf[:min(int64(len(buf)), size-pos)], pos)
		for i := 0; i < n; {
			j := bytes.Index(buf[i:n], spillMagic[:])
			if j < 0 {
				break
			}
			if _, _, ok := spillFrameAt(r, pos+int64(i+j), size); ok {
				return pos + int64(i+j)
			}
			i += j + 1
		}
	}
	return -1
}
