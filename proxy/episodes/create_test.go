package episodes_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/orchard-rl/orchard/proxy/episodes"
	"github.com/orchard-rl/orchard/recorder"
	"github.com/orchard-rl/orchard/recorder/embedded"
)

// TestConcurrentCreate: of 16 concurrent creates of one id, exactly one
// gets 201 and the rest 409.
func TestConcurrentCreate(t *testing.T) {
	st, err := embedded.Open(t.TempDir(), embedded.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e := mounted(t, episodes.Options{Store: st}, nil)
	admin := map[string]string{"Authorization": "Bearer " + adminToken}
	codes := make(chan int, 16)
	for range 16 {
		go func() {
			codes <- do(t, "POST", e.Proxy.URL+"/orchard/v1/episodes", admin, []byte(`{"id":"ep-race"}`)).Status
		}()
	}
	created := 0
	for range 16 {
		switch c := <-codes; c {
		case http.StatusCreated:
			created++
		case http.StatusConflict:
		default:
			t.Errorf("status %d, want 201 or 409", c)
		}
	}
	if created != 1 {
		t.Fatalf("%d creates succeeded, want 1", created)
	}
}

// TestCreateRefusesIDs: ids made of dots, the reserved bucket name and
// characters outside the id alphabet are refused with a 400 naming why.
func TestCreateRefusesIDs(t *testing.T) {
	st, err := embedded.Open(t.TempDir(), embedded.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e := mounted(t, episodes.Options{Store: st}, nil)
	admin := map[string]string{"Authorization": "Bearer " + adminToken}
	for _, tc := range []struct{ id, want string }{
		{"..", "is not valid"},
		{"a/b", "is not valid"},
		{recorder.Unattributed, "is reserved"},
	} {
		r := do(t, "POST", e.Proxy.URL+"/orchard/v1/episodes", admin, []byte(`{"id":"`+tc.id+`"}`))
		if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), tc.want) {
			t.Errorf("create %q: %d %s, want 400 saying %q", tc.id, r.Status, r.Body, tc.want)
		}
	}
}
