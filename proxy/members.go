package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/internal/jsonscan"
)

// reqMember names a top-level member of a request body the proxy reads.
type reqMember uint8

const (
	memModel reqMember = iota
	memStream
	memStreamOptions
	memReturnTokenIDs
	memTopLogprobs
	memLogprobs
	nMembers
)

var memberKeys = [nMembers]string{"model", "stream", "stream_options", "return_token_ids", "top_logprobs", "logprobs"}

// reqMembers are the members of a request body the proxy reads, found as
// the body is validated. gjson.GetBytes walked the body once per lookup,
// each time past the messages (tens of KB in an agent's request), and the
// proxy makes up to seven.
type reqMembers struct {
	body []byte
	vals [nMembers]gjson.Result
	// walked: body is an object whose keys have no escapes, so vals hold
	// exactly what gjson.GetBytes would return (its first member of each
	// name) and close is the index of its last '}'.
	walked bool
	close  int
}

// readMembers validates body and reads its members, or reports that it is
// not JSON. A JSON body that is not an object jsonscan accepts, or that has
// an escaped key, is read by gjson, one lookup per member.
func readMembers(body []byte) (*reqMembers, bool) {
	var buf [16]jsonscan.Member
	members, obj := jsonscan.ValidMembers(body, buf[:0])
	// jsonscan accepts nothing encoding/json rejects (FuzzValid), so
	// encoding/json only judges what it rejects.
	if !obj && !jsonscan.Valid(body) && !json.Valid(body) {
		return nil, false
	}
	m := &reqMembers{body: body}
	if obj && m.take(members) {
		return m, true
	}
	for k := range nMembers {
		m.vals[k] = gjson.GetBytes(body, memberKeys[k])
	}
	return m, true
}

// take fills vals from the members of the object body, unless a key has
// an escape (gjson compares it unescaped).
func (m *reqMembers) take(members []jsonscan.Member) bool {
	b := m.body
	var seen [nMembers]bool
	for _, mb := range members {
		key := b[mb.Key.Start+1 : mb.Key.End-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			return false
		}
		if k, ok := memberOf(key); ok && !seen[k] {
			seen[k] = true
			m.vals[k] = gjson.Parse(string(b[mb.Value.Start:mb.Value.End]))
		}
	}
	end := jsonscan.SkipSpace(b, 0) + 1 // past the '{'
	if len(members) > 0 {
		end = members[len(members)-1].Value.End
	}
	m.close, m.walked = jsonscan.SkipSpace(b, end), true // the object's '}'
	return true
}

func memberOf(key []byte) (reqMember, bool) {
	s := unsafe.String(unsafe.SliceData(key), len(key))
	for k, name := range memberKeys {
		if s == name {
			return reqMember(k), true
		}
	}
	return 0, false
}

// get returns the member k (gjson's answer for its key).
func (m *reqMembers) get(k reqMember) gjson.Result { return m.vals[k] }

// appendable reports whether a member k can be added by appending it: the
// body was walked and has no member of that name.
func (m *reqMembers) appendable(k reqMember) bool { return m.walked && !m.vals[k].Exists() }

// withAppended returns the body with the members adds (key and raw value)
// appended, byte for byte what sjson.SetBytes returns when it sets each
// absent key in turn: the object from its '{' to its last '}' (what
// surrounds it is dropped), a comma unless the object was empty, the new
// members, and the brace. It requires every key to be appendable. The
// body's part is not copied: the result's head is the client's bytes, so
// that a patched request does not hold its body twice.
func (m *reqMembers) withAppended(adds []memberAdd) sentBody {
	b := m.body
	start := jsonscan.SkipSpace(b, 0)
	n := 1
	for _, a := range adds {
		n += len(memberKeys[a.key]) + len(a.raw) + 4
	}
	tail := make([]byte, 0, n)
	empty := jsonscan.SkipSpace(b, start+1) == m.close
	for _, a := range adds {
		if !empty {
			tail = append(tail, ',')
		}
		empty = false
		tail = append(tail, '"')
		tail = append(tail, memberKeys[a.key]...)
		tail = append(tail, '"', ':')
		tail = append(tail, a.raw...)
	}
	return sentBody{head: b[start:m.close:m.close], tail: append(tail, '}')}
}

// sentBody is a request body as it goes upstream: head followed by tail.
// An unpatched body, or one patched by a copy, is all head.
type sentBody struct{ head, tail []byte }

func wholeBody(b []byte) sentBody { return sentBody{head: b} }

// none reports whether there is no body to send (none was read).
func (s sentBody) none() bool { return s.head == nil && s.tail == nil }

func (s sentBody) len() int { return len(s.head) + len(s.tail) }

// reader returns a new reader of the body, from its first byte.
func (s sentBody) reader() io.ReadCloser {
	return io.NopCloser(&net.Buffers{s.head, s.tail})
}

// memberAdd is a member the proxy adds to a request.
type memberAdd struct {
	key reqMember
	raw string
}
