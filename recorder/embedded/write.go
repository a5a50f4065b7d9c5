package embedded

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/orchard-rl/orchard/recorder"
)

// WriteCalls durably stores calls: it returns after they are fsynced.
// A call whose CallID the episode already holds (or that appears twice in
// calls) is skipped, so replays are exactly-once. A call without a CallID
// is an error; one without an EpisodeID goes to [recorder.Unattributed].
// The calls are not modified.
func (s *Store) WriteCalls(ctx context.Context, calls []*recorder.Call) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, c := range calls {
		if c == nil || c.CallID == "" {
			return errors.New("write calls: call without call_id")
		}
	}
	s.mu.Lock()
	pos, err := s.writeCallsLocked(calls)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.waitDurable(pos)
}

func (s *Store) writeCallsLocked(calls []*recorder.Call) (int64, error) {
	if err := s.writableLocked(); err != nil {
		return 0, err
	}
	var packs []packJob
	var groups []encodeGroup
	touched := map[string]int{} // episode -> its index in groups
	inBatch := map[string]bool{}
	for _, c := range calls {
		ep := c.EpisodeID
		if ep == "" {
			ep = recorder.Unattributed
		}
		if st := s.idx.eps[ep]; inBatch[c.CallID] || (st != nil && st.hasCall(c.CallID)) {
			continue
		}
		inBatch[c.CallID] = true
		gi, ok := touched[ep]
		if !ok {
			enc, err := s.encoderLocked(ep)
			if err != nil {
				return 0, err
			}
			gi = len(groups)
			touched[ep] = gi
			groups = append(groups, encodeGroup{enc: enc})
		}
		if c.EpisodeID != ep {
			cc := *c
			cc.EpisodeID = ep
			c = &cc
		}
		groups[gi].jobs = append(groups[gi].jobs, len(packs))
		bp := frameBufs.Get().(*[]byte)
		// The frame starts with room for its header, which sealFrame fills
		// in: the frames go to the file as they are, not copied into one
		// buffer.
		packs = append(packs, packJob{call: c, buf: bp,
			frame: appendCallHeader(append((*bp)[:0], make([]byte, frameHeader)...), callHeader{episode: ep, callID: c.CallID, started: c.StartedAt})})
	}
	if err := encodeAll(groups, packs); err != nil {
		s.dropEncoders(touched) // some of them took calls that will not be stored
		return 0, err
	}
	if len(packs) == 0 {
		return s.appended, nil
	}
	frames := make([][]byte, len(packs))
	for i := range packs {
		sealFrame(packs[i].frame)
		frames[i] = packs[i].frame
	}
	pos, err := s.appendLocked(frames...)
	releaseFrames(packs)
	if err != nil {
		s.dropEncoders(touched) // they think blocks were stored that were not
		return pos, err
	}
	s.sizeEncodersLocked(touched)
	s.finished.Wrote(len(packs), s.forgetEncoderLocked)
	return pos, nil
}

// packJob is one call of a write: the call, its frame (room for the
// frame header, then the call header, to which Pack appends the compressed
// document and blocks), and what encoding it gave.
type packJob struct {
	call   *recorder.Call
	frame  []byte
	buf    *[]byte // holds frame in frameBufs once the write is done
	doc    []byte
	blocks []recorder.Block
	err    error
}

// encodeGroup is the calls of one episode in a write, in their order, and
// the episode's encoder.
type encodeGroup struct {
	enc  *recorder.EpisodeEncoder
	jobs []int // indexes into the write's packJobs
}

// encodeAll encodes every episode's calls in order, episodes side by side
// (an encoder is the one piece of state, and each is one episode's), and
// compresses them. It returns the first failed call's error in write
// order; the encoders are then unusable for this write.
//
// With an episode for each goroutine or more, a call is compressed as
// soon as it is encoded, so that a write holds one uncompressed document
// per goroutine rather than one per call: with vLLM's logprobs a document
// is tens of KB, and a rollout's first turns, ending together, make writes
// of hundreds of calls. With fewer episodes the calls are compressed side
// by side afterwards, which keeps every goroutine busy.
func encodeAll(groups []encodeGroup, packs []packJob) error {
	inline := len(groups) >= runtime.GOMAXPROCS(0)
	encode := func(g *encodeGroup) {
		for _, i := range g.jobs {
			j := &packs[i]
			if j.doc, j.blocks, j.err = g.enc.Encode(j.call); j.err != nil {
				return // later calls of the episode would dedup against it
			}
			if inline {
				j.pack()
			}
		}
	}
	recorder.RunWriteJobs(len(groups), len(packs), func(i int) { encode(&groups[i]) })
	for _, j := range packs {
		if j.err != nil {
			return fmt.Errorf("encode call %s: %w", j.call.CallID, j.err)
		}
	}
	if !inline {
		recorder.RunWriteJobs(len(packs), len(packs), func(i int) { packs[i].pack() })
	}
	return nil
}

// pack compresses the job's document and new blocks into its frame and
// hands the document back.
func (j *packJob) pack() {
	j.frame = recorder.Pack(j.frame, j.doc, j.blocks)
	recorder.ReleaseDoc(j.doc)
	j.doc, j.call = nil, nil
}

// frameBufs recycles the frames of a write, which go to the file and the
// index (which copies what it keeps). Each was a new buffer grown by
// appends from the call header's size to the packed call's.
var frameBufs = sync.Pool{New: func() any { return new([]byte) }}

// releaseFrames hands the frames of a finished write to frameBufs.
func releaseFrames(packs []packJob) {
	for i := range packs {
		j := &packs[i]
		if j.buf != nil && cap(j.frame) <= 1<<20 { // a huge one goes to the GC
			*j.buf = j.frame[:0]
			frameBufs.Put(j.buf)
		}
		j.frame, j.buf = nil, nil
	}
}

func (s *Store) dropEncoders(eps map[string]int) {
	for ep := range eps {
		s.forgetEncoderLocked(ep)
	}
}

// PutEpisode creates or replaces an episode's metadata. A zero CreatedAt
// is set to now and an empty Status to "running" in what is stored. An
// episode stored as finished lets go of its dedup encoder once
// [recorder.FinishGrace] more calls are written: its calls are over but
// for those still on their way, and one written later rebuilds it from the
// stored calls.
func (s *Store) PutEpisode(ctx context.Context, ep *recorder.Episode) error {
	p, err := episodeFrame(ctx, ep)
	if err != nil {
		return err
	}
	if err := s.appendOne(p); err != nil {
		return err
	}
	if ep.Finished() {
		s.mu.Lock()
		if s.encoders[ep.ID] != nil {
			s.finished.Finished(ep.ID, s.forgetEncoderLocked)
		}
		s.mu.Unlock()
	}
	return nil
}

// episodeFrame is the payload of an episode frame: the normalized
// metadata after its type byte.
func episodeFrame(ctx context.Context, ep *recorder.Episode) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	e, err := recorder.NormalizeEpisode(ep)
	if err != nil {
		return nil, err
	}
	p, err := json.Marshal(&e)
	if err != nil {
		return nil, fmt.Errorf("encode episode %s: %w", e.ID, err)
	}
	return append([]byte{typeEpisode}, p...), nil
}

// CreateEpisode is [Store.PutEpisode] for an episode not stored yet; for
// one that is (with metadata, calls or events) it returns an error
// wrapping [recorder.ErrExists]. The check and the append share one hold
// of the store's lock, so of concurrent creates exactly one succeeds.
func (s *Store) CreateEpisode(ctx context.Context, ep *recorder.Episode) error {
	p, err := episodeFrame(ctx, ep)
	if err != nil {
		return err
	}
	frame := appendFrame(nil, p)
	s.mu.Lock()
	if s.idx.eps[ep.ID] != nil {
		s.mu.Unlock()
		return fmt.Errorf("create episode %s: %w", ep.ID, recorder.ErrExists)
	}
	pos, err := s.appendLocked(frame)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.waitDurable(pos)
}

// AppendEvent stores ev after the episode's earlier events, with Seq set to
// the returned 1-based number and a zero At set to now; ev itself is not
// modified.
func (s *Store) AppendEvent(ctx context.Context, ev *recorder.Event) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if ev == nil || ev.EpisodeID == "" {
		return 0, errors.New("append event: event without episode_id")
	}
	e := *ev
	if e.At.IsZero() {
		e.At = time.Now().UTC()
	}
	s.mu.Lock()
	e.Seq = 1
	if st := s.idx.eps[e.EpisodeID]; st != nil {
		e.Seq = int64(len(st.events)) + 1
	}
	p, err := json.Marshal(&e)
	if err != nil {
		s.mu.Unlock()
		return 0, fmt.Errorf("append event to %s: %w", e.EpisodeID, err)
	}
	pos, err := s.appendLocked(appendFrame(nil, append([]byte{typeEvent}, p...)))
	s.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return e.Seq, s.waitDurable(pos)
}

// DeleteEpisode tombstones an episode: its calls, events and metadata
// disappear from every read, here and in readers. It returns
// [recorder.ErrNotFound] for an unknown episode.
func (s *Store) DeleteEpisode(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	if err := s.writableLocked(); err != nil {
		s.mu.Unlock()
		return err
	}
	if s.idx.eps[id] == nil {
		s.mu.Unlock()
		return fmt.Errorf("delete episode %s: %w", id, recorder.ErrNotFound)
	}
	s.forgetEncoderLocked(id)
	pos, err := s.appendLocked(appendFrame(nil, append([]byte{typeDelete}, id...)))
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.waitDurable(pos)
}

func (s *Store) appendOne(payload []byte) error {
	frame := appendFrame(nil, payload)
	s.mu.Lock()
	pos, err := s.appendLocked(frame)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.waitDurable(pos)
}
