package embedded

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
)

// frameHeader is the size of a frame's length and CRC.
const frameHeader = 8

// maxFrame bounds a frame's payload; a larger length is treated as garbage.
const maxFrame = 1 << 30

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// appendFrame appends payload as one frame.
func appendFrame(dst, payload []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(payload)))
	dst = binary.LittleEndian.AppendUint32(dst, crc32.Checksum(payload, crcTable))
	return append(dst, payload...)
}

// sealFrame makes frame, whose first frameHeader bytes were left for it,
// one frame of the payload after them, in place.
func sealFrame(frame []byte) {
	payload := frame[frameHeader:]
	binary.LittleEndian.PutUint32(frame, uint32(len(payload)))
	binary.LittleEndian.PutUint32(frame[4:], crc32.Checksum(payload, crcTable))
}

// errTorn reports a frame that is incomplete or fails its CRC: the tail of
// a log being written, or the remains of a crash mid-append.
var errTorn = errors.New("torn frame")

// scanFrames calls fn with the offset and payload of each frame of f from
// off on, and returns the offset just past the last whole frame. A frame
// that is incomplete or fails its CRC is skipped when a valid frame follows
// it (see resync): skip gets the offset and length of the damaged bytes and
// scanning goes on there. With no valid frame after it, the bad frame is
// the log's tail and scanFrames stops there with errTorn; it returns nil at
// a clean end. The payload passed to fn is only valid during the call.
func scanFrames(f *os.File, off int64, fn func(off int64, payload []byte) error, skip func(off, n int64)) (int64, error) {
	for {
		end, err := scanRun(f, off, fn)
		if !errors.Is(err, errTorn) {
			return end, err
		}
		next, ok, rerr := resync(f, end)
		if rerr != nil {
			return end, rerr
		}
		if !ok {
			return end, err
		}
		skip(end, next-end)
		off = next
	}
}

// scanRun is scanFrames up to the first bad frame.
func scanRun(f *os.File, off int64, fn func(off int64, payload []byte) error) (int64, error) {
	r := bufio.NewReaderSize(io.NewSectionReader(f, off, maxFrame*4), 256<<10)
	var hdr [frameHeader]byte
	var buf []byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if err == io.EOF {
				return off, nil
			}
			return off, tornOr(err)
		}
		n := binary.LittleEndian.Uint32(hdr[:4])
		if n > maxFrame {
			return off, fmt.Errorf("frame at %d: length %d: %w", off, n, errTorn)
		}
		if cap(buf) < int(n) {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(r, buf); err != nil {
			return off, tornOr(err)
		}
		if crc32.Checksum(buf, crcTable) != binary.LittleEndian.Uint32(hdr[4:]) {
			return off, fmt.Errorf("frame at %d: checksum mismatch: %w", off, errTorn)
		}
		if err := fn(off, buf); err != nil {
			return off, err
		}
		off += frameHeader + int64(n)
	}
}

// resync finds the first offset after bad where a valid frame starts: a
// non-empty payload that fits in the file and matches its CRC-32C (the
// writer never writes an empty frame, so runs of zeros do not match). A
// false match needs a 32-bit checksum collision. It reads the rest of the
// segment into memory, which is bounded by the segment size.
func resync(f *os.File, bad int64) (int64, bool, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, false, fmt.Errorf("stat segment: %w", err)
	}
	rest := make([]byte, max(fi.Size()-bad-1, 0))
	if _, err := f.ReadAt(rest, bad+1); err != nil && err != io.EOF {
		return 0, false, fmt.Errorf("read segment: %w", err)
	}
	for i := 0; i+frameHeader < len(rest); i++ {
		n := int(binary.LittleEndian.Uint32(rest[i:]))
		if n == 0 || n > len(rest)-i-frameHeader {
			continue
		}
		p := rest[i+frameHeader : i+frameHeader+n]
		if crc32.Checksum(p, crcTable) == binary.LittleEndian.Uint32(rest[i+4:]) {
			return bad + 1 + int64(i), true, nil
		}
	}
	return 0, false, nil
}

func tornOr(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return errTorn
	}
	return fmt.Errorf("read segment: %w", err)
}

// readFrame reads the payload of the frame at off, verifying its CRC.
func readFrame(f *os.File, off int64) ([]byte, error) {
	var hdr [frameHeader]byte
	if _, err := f.ReadAt(hdr[:], off); err != nil {
		return nil, fmt.Errorf("read frame at %d: %w", off, err)
	}
	n := binary.LittleEndian.Uint32(hdr[:4])
	if n > maxFrame {
		return nil, fmt.Errorf("frame at %d: length %d: %w", off, n, errTorn)
	}
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, off+frameHeader); err != nil {
		return nil, fmt.Errorf("read frame at %d: %w", off, err)
	}
	if crc32.Checksum(buf, crcTable) != binary.LittleEndian.Uint32(hdr[4:]) {
		return nil, fmt.Errorf("frame at %d: checksum mismatch: %w", off, errTorn)
	}
	return buf, nil
}
