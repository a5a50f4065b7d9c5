package episodes_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/orchard-rl/orchard/proxy/episodes"
	"github.com/orchard-rl/orchard/recorder"
)

// fakeStore answers Episode from status, or blocks until the lookup's
// deadline while down is set; the API's other methods are not called.
type fakeStore struct {
	episodes.Store
	status map[string]string
	down   bool
}

func (s *fakeStore) Episode(ctx context.Context, id string) (*recorder.EpisodeSummary, error) {
	if s.down {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	st, ok := s.status[id]
	if !ok {
		return nil, fmt.Errorf("episode %s: %w", id, recorder.ErrNotFound)
	}
	return &recorder.EpisodeSummary{Episode: recorder.Episode{ID: id, Status: st}}, nil
}

// TestVerify is the verifier's contract: a harness key is no token, a
// token of a running episode names it, and a forged, expired, finished or
// unknown episode's token is refused, with the reason as its error.
func TestVerify(t *testing.T) {
	signer := newSigner(t)
	st := &fakeStore{status: map[string]string{"run": recorder.StatusRunning, "done": recorder.StatusSuccess}}
	h := episodes.New(episodes.Options{Store: st, Signer: signer})
	if err := h.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	good := signer.Issue("run", time.Hour)
	// Change a character inside the signature: the last one also holds
	// padding bits, which decoding ignores.
	i, c := len(good)-5, "A"
	if good[i] == 'A' {
		c = "B"
	}
	forged := good[:i] + c + good[i+1:]
	for _, tc := range []struct {
		name, cred, want string
		err              error
	}{
		{"harness key", "sk-harness", "", nil},
		{"running", good, "run", nil},
		{"forged", forged, "", episodes.ErrTokenInvalid},
		{"expired", signer.Issue("run", -time.Second), "", episodes.ErrTokenExpired},
		{"finished", signer.Issue("done", time.Hour), "", episodes.ErrTokenRevoked},
		{"unknown", signer.Issue("gone", time.Hour), "", episodes.ErrTokenRevoked},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := h.Verify(context.Background(), tc.cred)
			if got != tc.want || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Errorf("Verify = %q, %v; want %q, %v", got, err, tc.want, tc.err)
			}
		})
	}
}

// TestVerifyStoreDown: when the store cannot answer, a token is refused
// unless this replica saw its episode running; a finish seen here is
// remembered.
func TestVerifyStoreDown(t *testing.T) {
	signer := newSigner(t)
	st := &fakeStore{status: map[string]string{"seen": recorder.StatusRunning, "other": recorder.StatusRunning}}
	h := episodes.New(episodes.Options{Store: st, Signer: signer})
	if err := h.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	seen, other := signer.Issue("seen", time.Hour), signer.Issue("other", time.Hour)
	if ep, err := h.Verify(context.Background(), seen); ep != "seen" || err != nil {
		t.Fatalf("Verify(seen) with the store up = %q, %v", ep, err)
	}
	st.down = true
	if ep, err := h.Verify(context.Background(), seen); ep != "seen" || err != nil {
		t.Errorf("Verify(seen) with the store down = %q, %v; want it still good", ep, err)
	}
	if _, err := h.Verify(context.Background(), other); !errors.Is(err, episodes.ErrTokenRevoked) {
		t.Errorf("Verify(other) with the store down: %v, want it refused (fail closed)", err)
	}
}

func ExampleSigner() {
	s, _ := episodes.NewSigner([]byte("0123456789abcdef0123456789abcdef"))
	tok := s.Issue("ep-1", time.Hour)
	fmt.Println(s.Verify(tok))
	_, err := s.Verify("sk-a-harness-key")
	fmt.Println(errors.Is(err, episodes.ErrNotToken))
	// Output:
	// ep-1 <nil>
	// true
}
