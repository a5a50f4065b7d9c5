package embedded

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	"github.com/orchard-rl/orchard/recorder"
)

// Frame payload types (the first payload byte).
const (
	typeCall    = 'c' // episode, call id, started_at, then recorder.Pack(doc, new blocks)
	typeEpisode = 'e' // recorder.Episode as JSON
	typeEvent   = 'v' // recorder.Event as JSON, Seq filled in
	typeDelete  = 'd' // episode id: drops every earlier record of it
)

// loc is where a frame lives; body is the offset inside the payload where
// the part to decode starts. The index holds one per stored call, so it is
// kept small: 16 bytes.
type loc struct {
	off  int64
	seg  int32
	body int32
}

// callEntry is the index entry of a stored call: 32 bytes and the id's.
// Its start time is in the frame; the episode keeps the first and last.
type callEntry struct {
	id string
	at loc
}

// episodeState is everything the index knows about one episode.
type episodeState struct {
	id          string
	meta        *recorder.Episode   // last PutEpisode; nil when the episode only has calls
	calls       []callEntry         // storage order
	callIDs     map[string]struct{} // the calls' ids, once there are idMapMin of them (see hasCall)
	events      []loc
	first, last time.Time // min and max StartedAt of its calls
}

// index maps episode ids to their state. It is built by applying frames in
// log order, by writer and readers alike, so both see the same store.
type index struct {
	eps map[string]*episodeState
}

func newIndex() *index { return &index{eps: map[string]*episodeState{}} }

func (x *index) episode(id string) *episodeState {
	st := x.eps[id]
	if st == nil {
		st = &episodeState{id: id}
		x.eps[id] = st
	}
	return st
}

// callHeader is the unencoded prefix of a call frame.
type callHeader struct {
	episode, callID string
	started         time.Time
}

func appendCallHeader(dst []byte, h callHeader) []byte {
	dst = append(dst, typeCall)
	dst = binary.AppendUvarint(dst, uint64(len(h.episode)))
	dst = append(dst, h.episode...)
	dst = binary.AppendUvarint(dst, uint64(len(h.callID)))
	dst = append(dst, h.callID...)
	return binary.AppendVarint(dst, h.started.UnixNano())
}

// parseCallHeader returns the header and the offset of the packed body.
func parseCallHeader(p []byte) (callHeader, int, error) {
	var h callHeader
	i := 1
	str := func() (string, bool) {
		n, k := binary.Uvarint(p[i:])
		if k <= 0 || n > uint64(len(p)-i-k) {
			return "", false
		}
		s := string(p[i+k : i+k+int(n)])
		i += k + int(n)
		return s, true
	}
	var ok1, ok2 bool
	h.episode, ok1 = str()
	if ok1 {
		h.callID, ok2 = str()
	}
	if !ok1 || !ok2 {
		return h, 0, fmt.Errorf("call frame header: %w", recorder.ErrCorrupt)
	}
	ns, k := binary.Varint(p[i:])
	if k <= 0 {
		return h, 0, fmt.Errorf("call frame time: %w", recorder.ErrCorrupt)
	}
	h.started = time.Unix(0, ns).UTC()
	return h, i + k, nil
}

// apply adds one frame to the index. Frames it cannot parse are reported
// and skipped by the caller; unknown types are ignored so that older
// readers survive newer writers.
func (x *index) apply(seg int, off int64, p []byte) error {
	if len(p) == 0 {
		return fmt.Errorf("empty frame: %w", recorder.ErrCorrupt)
	}
	switch p[0] {
	case typeCall:
		h, body, err := parseCallHeader(p)
		if err != nil {
			return err
		}
		x.addCall(h, loc{seg: int32(seg), off: off, body: int32(body)})
	case typeEpisode:
		var ep recorder.Episode
		if err := json.Unmarshal(p[1:], &ep); err != nil {
			return fmt.Errorf("episode frame: %w: %w", recorder.ErrCorrupt, err)
		}
		x.episode(ep.ID).meta = &ep
	case typeEvent:
		var ev struct {
			EpisodeID string `json:"episode_id"`
		}
		if err := json.Unmarshal(p[1:], &ev); err != nil {
			return fmt.Errorf("event frame: %w: %w", recorder.ErrCorrupt, err)
		}
		st := x.episode(ev.EpisodeID)
		st.events = append(st.events, loc{seg: int32(seg), off: off, body: 1})
	case typeDelete:
		delete(x.eps, string(p[1:]))
	}
	return nil
}

func (x *index) addCall(h callHeader, at loc) {
	st := x.episode(h.episode)
	if st.hasCall(h.callID) {
		return
	}
	st.calls = append(st.calls, callEntry{id: h.callID, at: at})
	st.noteCallID(h.callID)
	if len(st.calls) == 1 || h.started.Before(st.first) {
		st.first = h.started
	}
	if h.started.After(st.last) {
		st.last = h.started
	}
}

// idMapMin is how many calls an episode has before its call ids get a
// map: below it, hasCall scans the calls. A map of a few ids costs more
// memory than the ids (about 50 bytes a call in episodes of ten,
// BenchmarkIndexMemory), and most episodes are short.
const idMapMin = 32

// hasCall reports whether the episode holds a call with this id.
func (st *episodeState) hasCall(id string) bool {
	if st.callIDs != nil {
		_, ok := st.callIDs[id]
		return ok
	}
	for _, c := range st.calls {
		if c.id == id {
			return true
		}
	}
	return false
}

// noteCallID records the id of the call just appended to st.calls for
// hasCall, building the map when the episode reaches idMapMin calls.
func (st *episodeState) noteCallID(id string) {
	if st.callIDs != nil {
		st.callIDs[id] = struct{}{}
		return
	}
	if len(st.calls) < idMapMin {
		return
	}
	st.callIDs = make(map[string]struct{}, 2*len(st.calls))
	for _, c := range st.calls {
		st.callIDs[c.id] = struct{}{}
	}
}

// summary returns the listing line of st.
func (st *episodeState) summary() recorder.EpisodeSummary {
	var s recorder.EpisodeSummary
	if st.meta != nil {
		s.Episode = *st.meta
	} else {
		s.Episode = recorder.Episode{ID: st.id, Status: recorder.StatusRunning, CreatedAt: st.first}
	}
	s.Calls = len(st.calls)
	if len(st.calls) > 0 {
		first, last := st.first, st.last
		s.FirstCallAt, s.LastCallAt = &first, &last
	}
	return s
}
