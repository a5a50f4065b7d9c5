package redisstore

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// keys names every key of one store; docs/record-format.md ("Redis key
// layout") describes them. All keys of an episode share the hash tag
// {<episode>} and so one cluster slot; the index keys share the tag {idx}.
type keys struct {
	prefix string
}

// episodeKeys are the keys of one episode, in the order the scripts take
// them.
type episodeKeys struct {
	ep     string // HASH: inc, ver, meta, first, last
	log    string // LIST: packed call frames in storage order
	ids    string // SET: stored call ids
	events string // LIST: event JSON in order
}

func (k keys) episode(id string) episodeKeys {
	p := k.prefix + ":{" + escapeTag(id) + "}:"
	return episodeKeys{ep: p + "ep", log: p + "log", ids: p + "ids", events: p + "ev"}
}

func (e episodeKeys) all() []string { return []string{e.ep, e.log, e.ids, e.events} }

// Index keys.
func (k keys) entries() string  { return k.prefix + ":{idx}:entries" }
func (k keys) all() string      { return k.prefix + ":{idx}:all" }
func (k keys) finished() string { return k.prefix + ":{idx}:finished" }

// filter names the sorted set of the episodes whose field (task, group or
// status) has value v.
func (k keys) filter(field, v string) string { return k.prefix + ":{idx}:" + field + ":" + v }

// escapeTag makes an episode id safe inside a hash tag: a '{' or '}' in it
// would end the tag early and scatter the episode over several slots.
// The mapping is injective, so distinct ids keep distinct keys.
func escapeTag(id string) string {
	if !strings.ContainsAny(id, "{}%") {
		return id
	}
	return strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D").Replace(id)
}

// validPrefix reports whether p can start every key: braces in it would
// become the hash tag.
func validPrefix(p string) error {
	if p == "" || strings.ContainsAny(p, "{}") {
		return fmt.Errorf("invalid key prefix %q: must be non-empty without braces", p)
	}
	return nil
}

// Time keys are fixed-width decimal strings that sort like the times they
// encode, so Lua can compare them as strings and the index can sort by
// them lexicographically (doubles cannot hold nanoseconds since 1970).
const timeKeyLen = 20

var (
	minTimeKey = time.Unix(0, -1<<63)
	maxTimeKey = time.Unix(0, 1<<63-1)
)

// timeKey encodes t as 20 decimal digits of its Unix nanoseconds offset by
// 2^63. Times outside what int64 nanoseconds hold (the zero Time among
// them) clamp to the ends.
func timeKey(t time.Time) string {
	var u uint64
	switch {
	case t.Before(minTimeKey):
		u = 0
	case t.After(maxTimeKey):
		u = 1<<64 - 1
	default:
		u = uint64(t.UnixNano()) ^ 1<<63
	}
	return fmt.Sprintf("%020d", u)
}

// parseTimeKey reverses timeKey. The all-zero key is the zero Time.
func parseTimeKey(s string) (time.Time, error) {
	u, err := strconv.ParseUint(s, 10, 64)
	if err != nil || len(s) != timeKeyLen {
		return time.Time{}, fmt.Errorf("time key %q: invalid", s)
	}
	if u == 0 {
		return time.Time{}, nil
	}
	return time.Unix(0, int64(u^1<<63)).UTC(), nil
}

// member is an episode's entry in the index sets: its creation time key,
// ':' and its id, so that lexicographic order is (created, id).
func member(created time.Time, id string) string { return timeKey(created) + ":" + id }

// memberID returns the episode id of an index member.
func memberID(m string) (string, bool) {
	if len(m) <= timeKeyLen || m[timeKeyLen] != ':' {
		return "", false
	}
	return m[timeKeyLen+1:], true
}
