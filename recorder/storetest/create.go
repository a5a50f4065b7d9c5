package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/orchard-rl/orchard/recorder"
)

// testCreateEpisode checks [recorder.Creator]: of 16 concurrent creates of
// one id exactly one succeeds and the rest get ErrExists, over several
// rounds; an episode that has only calls exists too.
func testCreateEpisode(t *testing.T, b Backend) {
	s := b.Open(t)
	cr, ok := s.(recorder.Creator)
	if !ok {
		t.Fatalf("%T does not implement recorder.Creator", s)
	}
	for round := range 5 {
		id := fmt.Sprintf("cr%d", round)
		if won := createRace(t, cr, id, 16); won != 1 {
			t.Fatalf("round %d: %d of 16 creates of %s succeeded, want 1", round, won, id)
		}
		sum, err := s.Episode(context.Background(), id)
		if err != nil || sum.Status != recorder.StatusRunning {
			t.Fatalf("round %d: episode %s after create: %+v, %v", round, id, sum, err)
		}
	}
	Write(t, s, ChatEpisode("callsonly", 1, 10)...)
	err := cr.CreateEpisode(context.Background(), &recorder.Episode{ID: "callsonly"})
	if !errors.Is(err, recorder.ErrExists) {
		t.Fatalf("create of an episode with calls: %v, want ErrExists", err)
	}
}

// createRace runs n concurrent creates of id and returns how many won; it
// fails the test on any error other than ErrExists.
func createRace(t *testing.T, cr recorder.Creator, id string, n int) int {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() { errs <- cr.CreateEpisode(context.Background(), &recorder.Episode{ID: id}) })
	}
	wg.Wait()
	close(errs)
	won := 0
	for err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, recorder.ErrExists):
			t.Fatalf("create %s: %v", id, err)
		}
	}
	return won
}
