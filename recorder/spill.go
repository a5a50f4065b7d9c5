package recorder

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// held is a call in the spill's in-memory backlog, with its frame.
type held struct {
	seq   uint64
	call  *Call
	frame []byte
}

// ErrSpillLocked is returned when another process holds the spill
// directory: two processes appending to one spill file lose records.
var ErrSpillLocked = errors.New("spill directory is in use by another process")

// spill is the pipeline's local append-only overflow file, dir/spill.log,
// of frames (see appendSpillFrame). Records are appended when the queue is
// full or the store fails, and replayed from off in order. dir/spill.off
// remembers off across restarts; replaying again from an older offset is
// harmless since stores skip known call ids. dir/spill.lock is held (flock)
// while the pipeline runs, so that two processes never share a spill file.
//
// When an append fails (a full disk), its frames wait in an in-memory
// backlog of at most maxBacklog bytes, which later appends join and which
// sync retries frame by frame, so that whatever space comes back is used
// at once and no frame is ever written twice. Calls that do not fit the
// backlog are dropped, counted and logged: the one loss the pipeline
// admits, and only when neither the store nor the disk takes a record.
type spill struct {
	dir        string
	maxBacklog int
	onDrop     func(calls int, err error) // counts and logs a drop
	onWrite    func(calls int)            // counts calls that reached the file

	mu           sync.Mutex // guards following
	f            *os.File   // open between Start and the end of its drain
	lock         *os.File   // the held dir/spill.lock
	end          int64      // file size
	off          int64      // first frame not yet replayed
	dirty        bool       // appended since the last fsync
	backlog      []held     // calls a failed append could not write, in order
	backlogBytes int
	heldSeq      uint64 // seq of the last call added to the backlog

	onAppend func() // test hook, called after each successful append; nil in production
}

func (s *spill) path() string    { return filepath.Join(s.dir, "spill.log") }
func (s *spill) offPath() string { return filepath.Join(s.dir, "spill.off") }

// open locks the spill directory and opens the spill file for the running
// pipeline, cutting a torn frame off its end and loading the replay offset.
func (s *spill) open() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f != nil {
		return nil
	}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return fmt.Errorf("create spill dir: %w", err)
	}
	lock, err := lockSpillDir(s.dir)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(s.path(), os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		lock.Close()
		return fmt.Errorf("open spill: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		lock.Close()
		return fmt.Errorf("stat spill: %w", err)
	}
	end, _, _ := readSpill(f, 0, fi.Size(), -1)
	if fi.Size() != end {
		if err := f.Truncate(end); err != nil {
			f.Close()
			lock.Close()
			return fmt.Errorf("cut torn spill tail: %w", err)
		}
	}
	s.f, s.lock, s.end, s.off = f, lock, end, 0
	if b, err := os.ReadFile(s.offPath()); err == nil && len(b) == 8 {
		if off := int64(binary.LittleEndian.Uint64(b)); off <= end {
			s.off = off
		}
	}
	return nil
}

// readSpill reads up to max calls (all frames when max < 0, without
// decoding them) of f, whose size is size, from off. It returns the offset
// after the last whole frame it read. A damaged frame with a valid one after
// it is skipped and reported in err (resynchronising on the magic); damage
// with nothing valid after it is a torn tail, where it stops quietly.
// Frames whose CRC holds but whose call does not decode are skipped and
// reported too.
func readSpill(f *os.File, off, size int64, max int) (int64, []*Call, error) {
	var bad error
	var calls []*Call
	for off < size && (max < 0 || len(calls) < max) {
		p, n, ok := spillFrameAt(f, off, size)
		if !ok {
			next := nextSpillFrame(f, off, size)
			if next < 0 {
				break
			}
			bad = errors.Join(bad, fmt.Errorf("skip %d damaged spill bytes at %d", next-off, off))
			off = next
			continue
		}
		if max >= 0 {
			if c, err := UnmarshalCall(p); err != nil {
				bad = errors.Join(bad, fmt.Errorf("skip spill frame at %d: %w", off, err))
			} else {
				calls = append(calls, c)
			}
		}
		off += n
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
	if len(calls) == 0 {
		return nil
	}
	frames := make([][]byte, 0, len(calls))
	var buf []byte
	for _, c := range calls {
		b, err := MarshalCall(c)
		if err != nil {
			return fmt.Errorf("spill call %s: %w", c.CallID, err) // unreachable: Call always marshals
		}
		f := appendSpillFrame(nil, b)
		frames = append(frames, f)
		buf = append(buf, f...)
	}
	if len(s.backlog) == 0 {
		err := s.writeLocked(buf)
		if err == nil {
			s.wroteLocked(len(calls))
			return nil
		}
		if s.f == nil {
			// The pipeline has stopped: nothing would retry a backlog.
			if s.onDrop != nil {
				s.onDrop(len(calls), err)
			}
			return err
		}
		s.keepLocked(calls, frames, err)
		return err
	}
	s.keepLocked(calls, frames, errors.New("earlier spill appends still wait in memory"))
	return nil
}

// keepLocked adds frames to the backlog, dropping (with onDrop) the calls
// that do not fit.
func (s *spill) keepLocked(calls []*Call, frames [][]byte, why error) {
	dropped := 0
	for i, f := range frames {
		if s.backlogBytes+len(f) > s.maxBacklog {
			dropped++
			continue
		}
		s.heldSeq++
		s.backlog = append(s.backlog, held{seq: s.heldSeq, call: calls[i], frame: f})
		s.backlogBytes += len(f)
	}
	if dropped > 0 && s.onDrop != nil {
		s.onDrop(dropped, why)
	}
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

func (s *spill) wroteLocked(calls int) {
	if s.onWrite != nil {
		s.onWrite(calls)
	}
	if s.onAppend != nil {
		s.onAppend()
	}
}

// flushBacklogLocked writes backlog frames, oldest first, until one fails.
func (s *spill) flushBacklogLocked() error {
	for len(s.backlog) > 0 {
		if err := s.writeLocked(s.backlog[0].frame); err != nil {
			return fmt.Errorf("retry %d unspilled calls: %w", len(s.backlog), err)
		}
		s.popLocked()
		s.wroteLocked(1)
	}
	return nil
}

func (s *spill) popLocked() {
	s.backlogBytes -= len(s.backlog[0].frame)
	s.backlog[0] = held{}
	s.backlog = s.backlog[1:]
	if len(s.backlog) == 0 {
		s.backlog = nil
	}
}

// peekBacklog returns up to max of the oldest backlog calls and the seq to
// acknowledge them with once the store has them: a store that answers
// takes them straight from memory when the disk still has no room.
func (s *spill) peekBacklog(max int) ([]*Call, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := min(max, len(s.backlog))
	if n == 0 {
		return nil, 0
	}
	calls := make([]*Call, n)
	for i := range n {
		calls[i] = s.backlog[i].call
	}
	return calls, s.backlog[n-1].seq
}

// ackBacklog forgets the backlog calls up to seq: the store has them.
// (Those that sync wrote to the file meanwhile are replayed again from
// there, a no-op for the store.)
func (s *spill) ackBacklog(seq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.backlog) > 0 && s.backlog[0].seq <= seq {
		s.popLocked()
	}
}

// sync writes what it can of the backlog and fsyncs what was appended
// since the last sync (group fsync).
func (s *spill) sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	berr := s.flushBacklogLocked()
	if !s.dirty {
		return berr
	}
	s.dirty = false
	if err := s.f.Sync(); err != nil {
		return errors.Join(berr, fmt.Errorf("sync spill: %w", err))
	}
	return berr
}

// pending reports whether calls wait in the spill file, or its backlog,
// for replay.
func (s *spill) pending() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.off < s.end || len(s.backlog) > 0
}

// backlogSize returns the bytes and calls waiting in the backlog.
func (s *spill) backlogSize() (int, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.backlogBytes, len(s.backlog)
}

// next reads up to max calls from the replay offset and returns the offset
// to advance to once they are stored.
func (s *spill) next(max int) ([]*Call, int64, error) {
	s.mu.Lock()
	f, off, end := s.f, s.off, s.end
	s.mu.Unlock()
	if f == nil {
		return nil, off, errors.New("spill is not open")
	}
	next, calls, err := readSpill(f, off, end, max)
	return calls, next, err
}

// advance marks the calls before off as replayed. Once everything is, the
// file is emptied; it reports whether that happened.
func (s *spill) advance(off int64) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.off = off
	if s.off < s.end || len(s.backlog) > 0 {
		return false, os.WriteFile(s.offPath(), binary.LittleEndian.AppendUint64(nil, uint64(off)), 0o644)
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

// close syncs and closes the file and releases the lock; later appends
// open the file themselves. Calls still in the backlog then are dropped
// (with onDrop): nothing is left to hold them.
func (s *spill) close() error {
	err := s.sync()
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.backlog); n > 0 {
		if s.onDrop != nil {
			s.onDrop(n, err)
		}
		s.backlog, s.backlogBytes = nil, 0
	}
	if s.f != nil {
		err = errors.Join(err, s.f.Close(), s.lock.Close())
		s.f, s.lock = nil, nil
	}
	return err
}
