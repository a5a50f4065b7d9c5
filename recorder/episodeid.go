package recorder

import (
	"errors"
	"strings"
)

// ErrEpisodeID is wrapped by [CheckEpisodeID]'s errors.
var ErrEpisodeID = errors.New("invalid episode id")

// CheckEpisodeID returns an error saying what is wrong with id as an
// episode id a client chose, or nil: it must satisfy [ValidEpisodeID] and
// not be [Unattributed] (naming that would merge into the bucket of calls
// without an episode). The error's text is meant for the client.
func CheckEpisodeID(id string) error {
	if !ValidEpisodeID(id) {
		return &episodeIDError{id, "is not valid: use 1-128 characters of A-Z a-z 0-9 . _ : -, not only dots"}
	}
	if id == Unattributed {
		return &episodeIDError{id, "is reserved for calls that name no episode; choose another"}
	}
	return nil
}

// ValidEpisodeID reports whether s is usable as an episode id: it appears
// in URLs, Redis keys and file names, so it is made of A-Z a-z 0-9 . _ : -
// and not of dots only ("." and ".." are path segments clients normalise
// away).
func ValidEpisodeID(s string) bool {
	if len(s) == 0 || len(s) > 128 || strings.Trim(s, ".") == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

type episodeIDError struct{ id, why string }

func (e *episodeIDError) Error() string {
	id := e.id
	if len(id) > 64 {
		id = id[:64] + "..."
	}
	return "episode id \"" + id + "\" " + e.why
}

func (e *episodeIDError) Unwrap() error { return ErrEpisodeID }
