package recorder

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// spillFrameMax bounds one spilled call; a larger length is a torn frame.
const spillFrameMax = 1 << 30

var spillCRC = crc32.MakeTable(crc32.Castagnoli)

// spill is the pipeline's local append-only overflow file, dir/spill.log:
// frames of (4-byte length, 4-byte CRC-32C, MarshalCall bytes). Records are
// appended when the queue is full or the store fails, and replayed from
// off in order. dir/spill.off remembers off across restarts; replaying
// again from an older offset is harmless since stores skip known call ids.
type spill struct {
	dir string

	mu      sync.Mutex // guards following
	f       *os.File   // open between Start and the end of its drain
	end     int64      // file size
	off     int64      // first frame not yet replayed
	dirty   bool       // appended since the last fsync
	backlog []*Call    // calls a failed append could not write; retried first

	onAppend func() // test hook, called after each successful append; nil in production
}

func (s *spill) path() string    { return filepath.Join(s.dir, "spill.log") }
func (s *spill) offPath() string { return filepath.Join(s.dir, "spill.off") }

// open opens the spill file for the running pipeline, cutting a torn frame
// off its end and loading the replay offset.
func (s *spill) open() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return fmt.Errorf("create spill dir: %w", err)
	}
	f, err := os.OpenFile(s.path(), os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open spill: %w", err)
	}
	end, _, err := readSpill(f, 0, -1)
	if err != nil {
		f.Close()
		return err
	}
	if fi, err := f.Stat(); err == nil && fi.Size() != end {
		if err := f.Truncate(end); err != nil {
			f.Close()
			return fmt.Errorf("cut torn spill tail: %w", err)
		}
	}
	s.f, s.end, s.off = f, end, 0
	if b, err := os.ReadFile(s.offPath()); err == nil && len(b) == 8 {
		if off := int64(binary.LittleEndian.Uint64(b)); off <= end {
			s.off = off
		}
	}
	return nil
}

// readSpill reads up to max frames (all when max < 0, without decoding
// them) of f from off and returns the offset after the last whole frame. It
// stops quietly at a torn frame. Frames whose CRC holds but whose call does
// not decode cannot be replayed: they are skipped and reported in err.
func readSpill(f *os.File, off int64, max int) (int64, []*Call, error) {
	var bad error
	r := bufio.NewReader(io.NewSectionReader(f, off, 1<<62))
	var calls []*Call
	var hdr [8]byte
	for max < 0 || len(calls) < max {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			break
		}
		n := binary.LittleEndian.Uint32(hdr[:4])
		if n > spillFrameMax {
			break
		}
		p := make([]byte, n)
		if _, err := io.ReadFull(r, p); err != nil || crc32.Checksum(p, spillCRC) != binary.LittleEndian.Uint32(hdr[4:]) {
			break
		}
		if max >= 0 {
			if c, err := UnmarshalCall(p); err != nil {
				bad = errors.Join(bad, fmt.Errorf("skip spill frame at %d: %w", off, err))
			} else {
				calls = append(calls, c)
			}
		}
		off += 8 + int64(n)
	}
	return off, calls, bad
}

// append writes calls to the spill file. When the pipeline is not running
// (f is nil) it opens, appends, fsyncs and closes the file itself.
func (s *spill) append(calls []*Call) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.appendLocked(calls)
}

func (s *spill) appendLocked(calls []*Call) error {
	calls = append(s.backlog, calls...)
	s.backlog = nil
	var buf []byte
	for _, c := range calls {
		b, err := MarshalCall(c)
		if err != nil {
			return fmt.Errorf("spill call %s: %w", c.CallID, err) // unreachable: Call always marshals
		}
		buf = binary.LittleEndian.AppendUint32(buf, uint32(len(b)))
		buf = binary.LittleEndian.AppendUint32(buf, crc32.Checksum(b, spillCRC))
		buf = append(buf, b...)
	}
	if err := s.writeLocked(buf); err != nil {
		s.backlog = calls
		return err
	}
	if s.onAppend != nil && len(calls) > 0 {
		s.onAppend()
	}
	return nil
}

func (s *spill) writeLocked(buf []byte) error {
	if s.f != nil {
		if _, err := s.f.Write(buf); err != nil {
			if terr := s.f.Truncate(s.end); terr != nil {
				return errors.Join(fmt.Errorf("append to spill: %w", err), terr)
			}
			return fmt.Errorf("append to spill: %w", err)
		}
		s.end += int64(len(buf))
		s.dirty = true
		return nil
	}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return fmt.Errorf("create spill dir: %w", err)
	}
	f, err := os.OpenFile(s.path(), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open spill: %w", err)
	}
	_, err = f.Write(buf)
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// sync fsyncs what was appended since the last sync (group fsync).
func (s *spill) sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.backlog) > 0 && s.f != nil {
		if err := s.appendLocked(nil); err != nil {
			return fmt.Errorf("retry %d unspilled calls: %w", len(s.backlog), err)
		}
	}
	if s.f == nil || !s.dirty {
		return nil
	}
	s.dirty = false
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("sync spill: %w", err)
	}
	return nil
}

// pending reports whether calls wait in the spill file for replay.
func (s *spill) pending() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.off < s.end || len(s.backlog) > 0
}

// next reads up to max calls from the replay offset and returns the offset
// to advance to once they are stored.
func (s *spill) next(max int) ([]*Call, int64, error) {
	s.mu.Lock()
	f, off := s.f, s.off
	s.mu.Unlock()
	if f == nil {
		return nil, off, errors.New("spill is not open")
	}
	end, calls, err := readSpill(f, off, max)
	return calls, end, err
}

// advance marks the calls before off as replayed. Once everything is, the
// file is emptied; it reports whether that happened.
func (s *spill) advance(off int64) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.off = off
	if s.off < s.end || len(s.backlog) > 0 {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(off))
		return false, os.WriteFile(s.offPath(), b[:], 0o644)
	}
	if err := s.f.Truncate(0); err != nil {
		return false, fmt.Errorf("empty spill: %w", err)
	}
	s.off, s.end, s.dirty = 0, 0, true
	if err := os.Remove(s.offPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return true, fmt.Errorf("remove spill offset: %w", err)
	}
	return true, nil
}

// close syncs and closes the file; later appends open it themselves.
func (s *spill) close() error {
	err := s.sync()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f != nil {
		err = errors.Join(err, s.f.Close())
		s.f = nil
	}
	return err
}
