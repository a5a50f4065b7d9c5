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

// errTorn reports a frame that is incomplete or fails its CRC: the tail of
// a log being written, or the remains of a crash mid-append.
var errTorn = errors.New("torn frame")

// scanFrames calls fn with the offset and payload of each frame of f from
// off on, and returns the offset just past the last whole frame. It stops
// with errTorn at an incomplete or corrupt frame, and with nil at a clean
// end. The payload passed to fn is only valid during the call.
func scanFrames(f *os.File, off int64, fn func(off int64, payload []byte) error) (int64, error) {
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
