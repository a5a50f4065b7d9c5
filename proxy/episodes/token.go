package episodes

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/orchard-rl/orchard/recorder"
)

// tokenPrefix starts every episode token, so that a token is told from a
// harness's own key without trying to verify it.
const tokenPrefix = "orch1_"

// Signer issues and verifies episode tokens: tokenPrefix, then base64url of
// the episode id, the expiry (unix seconds, 8 bytes big endian) and an
// HMAC-SHA256 tag over both, separated by dots. Any replica that shares the
// secret verifies a token without a lookup. A Signer is safe for concurrent
// use.
type Signer struct {
	secret []byte
	now    func() time.Time
}

// NewSigner returns a Signer for secret, which must be at least 16 bytes.
func NewSigner(secret []byte) (*Signer, error) {
	if len(secret) < 16 {
		return nil, errors.New("token secret must be at least 16 bytes")
	}
	return &Signer{secret: secret, now: time.Now}, nil
}

// Issue returns a token for episode valid for ttl.
func (s *Signer) Issue(episode string, ttl time.Duration) string {
	var exp [8]byte
	binary.BigEndian.PutUint64(exp[:], uint64(s.now().Add(ttl).Unix()))
	ep := b64.EncodeToString([]byte(episode))
	ex := b64.EncodeToString(exp[:])
	return tokenPrefix + ep + "." + ex + "." + b64.EncodeToString(s.tag(ep, ex))
}

// Errors of [Signer.Verify].
var (
	// ErrNotToken is returned for a string that is no episode token at all.
	ErrNotToken     = errors.New("not an episode token")
	ErrTokenInvalid = errors.New("episode token is malformed or its signature does not match")
	ErrTokenExpired = errors.New("episode token has expired")
)

// Verify returns the episode tok is bound to, or [ErrNotToken] when tok is
// no episode token, or another error when it is one but is forged or
// expired. It does not check revocation: [Handler.Verify] does.
func (s *Signer) Verify(tok string) (string, error) {
	if !strings.HasPrefix(tok, tokenPrefix) {
		return "", ErrNotToken
	}
	parts := strings.Split(tok[len(tokenPrefix):], ".")
	if len(parts) != 3 {
		return "", ErrTokenInvalid
	}
	sig, err := b64.DecodeString(parts[2])
	if err != nil || !hmac.Equal(sig, s.tag(parts[0], parts[1])) {
		return "", ErrTokenInvalid
	}
	ep, err1 := b64.DecodeString(parts[0])
	exp, err2 := b64.DecodeString(parts[1])
	if err1 != nil || err2 != nil || len(exp) != 8 || !recorder.ValidEpisodeID(string(ep)) {
		return "", ErrTokenInvalid
	}
	if s.now().Unix() >= int64(binary.BigEndian.Uint64(exp)) {
		return "", fmt.Errorf("episode %s: %w", ep, ErrTokenExpired)
	}
	return string(ep), nil
}

func (s *Signer) tag(ep, exp string) []byte {
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte(ep))
	m.Write([]byte{'.'})
	m.Write([]byte(exp))
	return m.Sum(nil)[:20]
}

var b64 = base64.RawURLEncoding
