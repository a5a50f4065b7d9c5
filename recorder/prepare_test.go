package recorder

import (
	"bytes"
	"reflect"
	"testing"
)

// TestPreparedEncodesTheSame checks that a call prepared by the pipeline
// encodes to the same document and blocks as one that is not, for a dedup
// encoder, for the spill file's encoding, and for a store's copy that
// fills in the episode.
func TestPreparedEncodesTheSame(t *testing.T) {
	for name, calls := range map[string][]*Call{"vllm": vllmEpisode(6), "chat": growingEpisode(6, 300)} {
		plain, prepped := NewEpisodeEncoder(true), NewEpisodeEncoder(true)
		for i, c := range calls {
			p := *c
			prepare(&p)
			if p.prep == nil {
				t.Fatalf("%s call %d: not prepared", name, i)
			}
			d1, b1, err1 := plain.Encode(c)
			d2, b2, err2 := prepped.Encode(&p)
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			if !bytes.Equal(d1, d2) || !reflect.DeepEqual(b1, b2) {
				t.Errorf("%s call %d: prepared call encodes differently", name, i)
			}
			m1, err1 := MarshalCall(c)
			m2, err2 := MarshalCall(&p)
			if err1 != nil || err2 != nil || !bytes.Equal(m1, m2) {
				t.Errorf("%s call %d: prepared call spills differently (%v, %v)", name, i, err1, err2)
			}
			// A store's copy with another episode id must not use the
			// metadata marshalled for the original.
			cp := p
			cp.EpisodeID += "-other"
			want := *c
			want.EpisodeID = cp.EpisodeID
			d1, _, err1 = NewEpisodeEncoder(true).Encode(&want)
			d2, _, err2 = NewEpisodeEncoder(true).Encode(&cp)
			if err1 != nil || err2 != nil || !bytes.Equal(d1, d2) {
				t.Errorf("%s call %d: prepared copy with another episode encodes differently (%v, %v)", name, i, err1, err2)
			}
			// Nor one whose body was replaced.
			cp = p
			cp.Response = append([]byte(nil), c.Response...)
			cp.Response[len(cp.Response)-1] = ' '
			want = *c
			want.Response = cp.Response
			d1, _, err1 = NewEpisodeEncoder(true).Encode(&want)
			d2, _, err2 = NewEpisodeEncoder(true).Encode(&cp)
			if err1 != nil || err2 != nil || !bytes.Equal(d1, d2) {
				t.Errorf("%s call %d: prepared copy with another body encodes differently (%v, %v)", name, i, err1, err2)
			}
		}
	}
}

// TestEncoderBytes: an encoder's estimated size grows as it learns blocks,
// and its per-call cache always equals a fresh count (a call's token ids
// and layouts are dropped once it leaves the token window).
func TestEncoderBytes(t *testing.T) {
	e := NewEpisodeEncoder(true)
	prev := e.Bytes()
	for i, c := range vllmEpisode(30) {
		if _, _, err := e.Encode(c); err != nil {
			t.Fatal(err)
		}
		got := e.Bytes()
		if fresh := e.size((*callRefs).count); got != fresh {
			t.Fatalf("call %d: Bytes %d, a fresh count %d", i, got, fresh)
		}
		if i < 3 && got <= prev {
			t.Fatalf("call %d: Bytes %d did not grow from %d", i, got, prev)
		}
		prev = got
	}
}
