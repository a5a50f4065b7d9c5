package assemble

// Unseen is a member of a chat or completions response that the caller
// asked the upstream for and its client never saw: the token ids and
// logprobs a recording proxy injects (and strips from what the client
// gets, by the same description). The assembled response shows it as
// the client's stream did, as null or not at all, while its ids and
// logprobs still go to Result.Tokens: the record of a call is then the
// call as the client saw it, and not several times its size (a vLLM chat
// answer's logprob entries are most of its bytes).
type Unseen struct {
	Name      string // "prompt_token_ids", "token_ids" or "logprobs"
	PerChoice bool   // a member of every choice; else of the response
	Remove    bool   // the client saw no such key; else it saw null
}

// Hide makes the response show fields as the client saw them (see
// [Unseen]). Call it before the first Write or Event; it applies to chat
// and completions streams and is ignored for other APIs.
func (s *Streamer) Hide(fields []Unseen) {
	if c, ok := s.a.(*choices); ok {
		c.unseen = fields
	}
}

type unseen []Unseen

// has reports whether the member name (of each choice, or of the
// response) is unseen.
func (u unseen) has(name string, perChoice bool) bool {
	for _, f := range u {
		if f.Name == name && f.PerChoice == perChoice {
			return true
		}
	}
	return false
}

// apply shows the unseen members of o (a choice, or the response) as the
// client saw them.
func (u unseen) apply(o *object, perChoice bool) {
	for _, f := range u {
		switch {
		case f.PerChoice != perChoice || !o.has(f.Name):
		case f.Remove:
			o.del(f.Name)
		default:
			o.set(f.Name, nullJSON)
		}
	}
}
