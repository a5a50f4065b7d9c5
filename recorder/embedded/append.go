package embedded

import (
	"errors"
	"fmt"
	"os"

	"github.com/orchard-rl/orchard/recorder"
)

// appendLocked writes frames (whole frames, in order) to the active
// segment in one write, rotating first if the segment is full, and applies
// them to the index. It returns the logical end position to wait on with
// waitDurable. A failed write is cut back off the file so that the log
// never keeps a torn frame in its middle; if even that fails, the store
// refuses further writes.
func (s *Store) appendLocked(frames ...[]byte) (int64, error) {
	if err := s.writableLocked(); err != nil {
		return 0, err
	}
	size := int64(0)
	for _, f := range frames {
		size += int64(len(f))
	}
	if s.size > 0 && s.size+size > s.opts.SegmentBytes {
		if err := s.rotateLocked(); err != nil {
			return 0, err
		}
	}
	if err := writeAll(s.active, frames); err != nil {
		if terr := s.active.Truncate(s.size); terr != nil {
			s.broken = fmt.Errorf("log tail unrecoverable after %w: %w", err, terr)
		}
		return 0, fmt.Errorf("append to log: %w", err)
	}
	seg := s.segs[len(s.segs)-1]
	for _, f := range frames {
		if err := s.idx.apply(seg, s.size, f[frameHeader:]); err != nil {
			return 0, fmt.Errorf("index own frame: %w", err) // unreachable: we built it
		}
		s.size += int64(len(f))
	}
	s.appended += size
	return s.appended, nil
}

func (s *Store) writableLocked() error {
	switch {
	case s.closed:
		return ErrClosed
	case s.readOnly:
		return ErrReadOnly
	case s.broken != nil:
		return s.broken
	}
	return nil
}

// rotateLocked syncs the active segment and starts the next one.
func (s *Store) rotateLocked() error {
	if !s.opts.NoSync {
		if err := s.active.Sync(); err != nil {
			return fmt.Errorf("sync segment: %w", err)
		}
	}
	n := s.segs[len(s.segs)-1] + 1
	f, err := os.OpenFile(segPath(s.dir, n), os.O_RDWR|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("create segment: %w", err)
	}
	if err := syncDir(s.dir); err != nil && !s.opts.NoSync {
		f.Close()
		return err
	}
	s.files[n], s.segs, s.active, s.size = f, append(s.segs, n), f, 0
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open dir for sync: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync dir: %w", err)
	}
	return nil
}

// waitDurable returns once everything appended up to pos is on disk. One
// caller at a time runs fsync, covering every append made before it
// started; the others wait for it (group commit), so concurrent writers
// share fsyncs instead of queueing one each.
func (s *Store) waitDurable(pos int64) error {
	if s.opts.NoSync {
		return nil
	}
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	for s.syncedPos < pos {
		if s.syncErr != nil {
			return s.syncErr
		}
		if s.syncing {
			s.syncCond.Wait()
			continue
		}
		s.syncing = true
		s.mu.RLock()
		f, target := s.active, s.appended
		s.mu.RUnlock()
		s.syncMu.Unlock()
		err := f.Sync()
		s.syncMu.Lock()
		s.syncing = false
		if err != nil && !errors.Is(err, os.ErrClosed) {
			s.syncErr = fmt.Errorf("sync log: %w", err)
		} else if err != nil {
			s.syncErr = ErrClosed
		} else if target > s.syncedPos {
			s.syncedPos = target
		}
		s.syncCond.Broadcast()
	}
	return nil
}

// encoderLocked returns the dedup encoder of an episode, rebuilding it from
// the episode's stored calls the first time it is needed after Open.
//
// At most Options.MaxEncoders episodes keep an encoder; past that the least
// recently written one is dropped and rebuilt if it is written again.
func (s *Store) encoderLocked(episode string) (*recorder.EpisodeEncoder, error) {
	s.encoderTick++
	if e := s.encoders[episode]; e != nil {
		s.encoderUse[episode] = s.encoderTick
		return e, nil
	}
	if len(s.encoders) >= s.opts.MaxEncoders {
		s.evictEncoderLocked()
	}
	e := s.rebuildEncoderLocked(episode)
	s.encoders[episode] = e
	s.encoderUse[episode] = s.encoderTick
	return e, nil
}

// rebuildEncoderLocked returns an encoder that knows the episode's stored
// calls. If one of them cannot be read back (a quarantined record) it
// returns a fresh encoder instead: the episode's next calls are then stored
// whole, which costs dedup once, where failing would retry the write
// forever and hold up every episode behind it.
func (s *Store) rebuildEncoderLocked(episode string) *recorder.EpisodeEncoder {
	e := recorder.NewEpisodeEncoder(!s.opts.NoDedup)
	st := s.idx.eps[episode]
	if st == nil || len(st.calls) == 0 {
		return e
	}
	s.rebuilds++
	for _, c := range st.calls {
		docBytes, _, err := s.readCall(c.at)
		if err == nil {
			err = e.Observe(docBytes)
		}
		if err != nil {
			s.log.Warn("dedup state not rebuilt; storing the episode's next calls whole", "episode", episode, "call", c.id, "err", err)
			return recorder.NewEpisodeEncoder(!s.opts.NoDedup)
		}
	}
	return e
}

// evictEncoderLocked drops the least recently used encoder. A scan is
// fine: it runs once per MaxEncoders-th new episode, or once per encoder
// over MaxEncoderBytes, at most.
func (s *Store) evictEncoderLocked() {
	oldest, at := "", uint64(0)
	for ep, t := range s.encoderUse {
		if oldest == "" || t < at {
			oldest, at = ep, t
		}
	}
	s.forgetEncoderLocked(oldest)
	s.evictions++
}

// DedupStats reports the encoders the store keeps in memory.
func (s *Store) DedupStats() recorder.DedupStats {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return recorder.DedupStats{Episodes: len(s.encoders), Bytes: s.encoderSum, Evictions: s.evictions, Rebuilds: s.rebuilds,
		Compactions: s.compactions}
}

// forgetEncoderLocked drops an episode's encoder.
func (s *Store) forgetEncoderLocked(ep string) {
	s.encoderSum -= s.encoderSize[ep]
	delete(s.encoders, ep)
	delete(s.encoderUse, ep)
	delete(s.encoderSize, ep)
}

// sizeEncodersLocked notes the size of the encoders of eps, just written,
// then drops the least recently written encoders while their sum is over
// Options.MaxEncoderBytes (the last one written stays).
func (s *Store) sizeEncodersLocked(eps map[string]int) {
	for ep := range eps {
		if e := s.encoders[ep]; e != nil {
			s.resizeEncoderLocked(ep, e)
		}
	}
	s.compactIdleLocked()
	for s.encoderSum > s.opts.MaxEncoderBytes && len(s.encoders) > 1 {
		s.evictEncoderLocked()
	}
}

// compactIdleLocked compacts the encoders of the episodes s.idle finds
// idle, when a look is due.
func (s *Store) compactIdleLocked() {
	if !s.idle.Due(s.encoderTick) {
		return
	}
	for ep, t := range s.encoderUse {
		if e := s.encoders[ep]; s.idle.Idle(s.encoderTick, t) && e.Compact() {
			s.resizeEncoderLocked(ep, e)
			s.compactions++
		}
	}
}

// resizeEncoderLocked notes the size of ep's encoder e now.
func (s *Store) resizeEncoderLocked(ep string, e *recorder.EpisodeEncoder) {
	n := e.Bytes()
	s.encoderSum += n - s.encoderSize[ep]
	s.encoderSize[ep] = n
}

// readCall reads and unpacks the call frame at l.
func (s *Store) readCall(l loc) ([]byte, []recorder.Block, error) {
	f := s.files[int(l.seg)]
	if f == nil {
		return nil, nil, fmt.Errorf("segment %d: %w", l.seg, os.ErrNotExist)
	}
	p, err := readFrame(f, l.off)
	if err != nil {
		return nil, nil, err
	}
	return recorder.Unpack(p[l.body:])
}
