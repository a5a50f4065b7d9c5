package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/orchard-rl/orchard/recorder"
	"github.com/orchard-rl/orchard/recorder/embedded"
	"github.com/orchard-rl/orchard/recorder/storetest"
)

func TestViewConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  viewConfig
		want string // "" for valid
	}{
		{"loopback", viewConfig{Listen: "127.0.0.1:7070", Auth: "none"}, ""},
		{"localhost", viewConfig{Listen: "localhost:0", Auth: "none"}, ""},
		{"open to all without auth", viewConfig{Listen: "0.0.0.0:7070", Auth: "none"}, "not a loopback address"},
		{"open to all with auth", viewConfig{Listen: "0.0.0.0:7070", Auth: "required", AdminToken: "t"}, ""},
		{"auth without token", viewConfig{Listen: "127.0.0.1:7070", Auth: "required"}, "--admin-token"},
		{"bad auth", viewConfig{Listen: "127.0.0.1:7070", Auth: "maybe"}, "want none or required"},
	}
	for _, tt := range tests {
		err := tt.cfg.Validate()
		if (tt.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Validate() = %v, want %q", tt.name, err, tt.want)
		}
	}
}

// TestViewCommand runs `orchard view` over a data directory and reads
// the list over its socket.
func TestViewCommand(t *testing.T) {
	dir := t.TempDir()
	st, err := embedded.Open(dir, embedded.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	storetest.Write(t, st, storetest.ChatEpisode("ep-view", 2, 50)...)
	if err := st.PutEpisode(context.Background(), &recorder.Episode{ID: "ep-view", TaskID: "t", Status: recorder.StatusSuccess}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		cmd := newRootCmd()
		cmd.SetArgs([]string{"view", "--data", dir, "--listen", "127.0.0.1:0"})
		cmd.SetOut(pw)
		done <- cmd.ExecuteContext(ctx)
		pw.Close()
	}()
	line := make([]byte, 256)
	n, err := pr.Read(line)
	go io.Copy(io.Discard, pr)
	addr := regexp.MustCompile(`http://\S+/`).Find(line[:n])
	if err != nil || addr == nil {
		t.Fatalf("view printed %q, %v", line[:n], err)
	}
	res, err := http.Get(string(addr) + "episodes/ep-view")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !bytes.Contains(body, []byte(`<h1>Episode <span class="id">ep-view</span></h1>`)) {
		t.Fatalf("GET episode = %d:\n%s", res.StatusCode, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("view: %v", err)
	}
}
