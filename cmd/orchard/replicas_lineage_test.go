package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/internal/llmtest"
	"github.com/orchard-rl/orchard/internal/redistest"
	"github.com/orchard-rl/orchard/proxy/episodes"
	"github.com/orchard-rl/orchard/proxy/proxytest"
	"github.com/orchard-rl/orchard/recorder"
)

const lineageAdmin = "lineage-admin-token"

// TestReplicasAgreeOnLineage plays one scripted episode (root, extend,
// retry, an edit of an early turn, a fork and its extension) through two
// proxy replicas on one Redis, alternating between them as a round-robin
// Service does, and once more through a single replica. A third replica,
// started after both runs stopped (a restart), serves both episodes: their
// calls come back in the same order with the same lineage, which is also
// the lineage the single replica recorded at call time (the replicas run
// with --live-lineage).
func TestReplicasAgreeOnLineage(t *testing.T) {
	rs := redistest.NewServer(t)
	up := llmtest.NewServer(llmtest.Options{})
	defer up.Close()

	a, stopA := startLineageReplica(t, rs.URL(), up.URL())
	b, stopB := startLineageReplica(t, rs.URL(), up.URL())
	multi := playLineageScript(t, []string{a, b})
	stopA()
	stopB()
	c, stopC := startLineageReplica(t, rs.URL(), up.URL())
	single := playLineageScript(t, []string{c})
	stopC()

	d, stopD := startLineageReplica(t, rs.URL(), up.URL())
	defer stopD()
	want := []string{"root", "extend<-0", "retry<-1", "extend<-2", "edited<-3", "fork<-4", "extend<-5"}
	gotSingle, gotMulti := servedLineage(t, d, single), servedLineage(t, d, multi)
	if !reflect.DeepEqual(gotSingle, want) {
		t.Errorf("one replica: lineage %q, want %q", gotSingle, want)
	}
	if !reflect.DeepEqual(gotMulti, gotSingle) {
		t.Errorf("two replicas: lineage %q, want what one gives, %q", gotMulti, gotSingle)
	}
	if o1, o2 := servedOrder(t, d, single), servedOrder(t, d, multi); !reflect.DeepEqual(o1, o2) {
		t.Errorf("two replicas: record order %q, want %q", o2, o1)
	}

	// What each replica recorded at call time: one replica saw everything,
	// so its record agrees; two replicas each saw half, so theirs does not
	// (which is why lineage is classified on read).
	recSingle, recMulti := recordedLineage(t, rs.URL(), single), recordedLineage(t, rs.URL(), multi)
	if !reflect.DeepEqual(recSingle, want) {
		t.Errorf("one replica recorded %q, want %q", recSingle, want)
	}
	if reflect.DeepEqual(recMulti, want) {
		t.Errorf("two replicas recorded %q at call time, want partial-history lineage", recMulti)
	}
}

// startLineageReplica runs one proxy replica on Redis in secure mode,
// with the secret every replica shares; stop drains its records into Redis.
func startLineageReplica(t *testing.T, redisURL, upstream string) (string, func()) {
	t.Helper()
	cfg := &proxyConfig{Listen: "127.0.0.1:0", Upstream: upstream + "/v1", Redis: redisURL, IdleTimeout: time.Minute,
		MaxBody: 1 << 20, Auth: "required", TokenSecret: "lineage-secret-of-all-replicas", AdminToken: lineageAdmin,
		TokenTTL: time.Hour, LiveLineage: true}
	t.Setenv("ORCHARD_SPILL_DIR", t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan string, 1), make(chan error, 1)
	go func() { done <- runProxy(ctx, cfg, slog.New(slog.DiscardHandler), ready) }()
	select {
	case addr := <-ready:
		stopped := false
		return "http://" + addr, func() {
			if stopped {
				return
			}
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("replica: %v", err)
			}
		}
	case err := <-done:
		cancel()
		t.Fatalf("replica: %v", err)
		return "", nil
	}
}

// playLineageScript creates an episode and plays the script, sending call
// i to replicas[i%len(replicas)]; it returns the episode id.
func playLineageScript(t *testing.T, replicas []string) string {
	t.Helper()
	auth := map[string]string{"Authorization": "Bearer " + lineageAdmin}
	r := proxytest.Do(t, "POST", replicas[0]+"/orchard/v1/episodes", auth, []byte(`{"task_id":"t-lineage"}`))
	if r.Status != http.StatusCreated {
		t.Fatalf("create episode: %d %s", r.Status, r.Body)
	}
	var ep episodes.Created
	if err := json.Unmarshal(r.Body, &ep); err != nil {
		t.Fatal(err)
	}
	n := 0
	call := func(msgs ...string) string {
		base := replicas[n%len(replicas)]
		n++
		body := fmt.Sprintf(`{"model":"text","messages":[%s]}`, joinMsgs(msgs))
		res := proxytest.Do(t, "POST", base+"/e/"+ep.ID+"/v1/chat/completions",
			map[string]string{"Authorization": "Bearer " + ep.Token}, []byte(body))
		if res.Status != http.StatusOK {
			t.Fatalf("call %d on %s: %d %s", n, base, res.Status, res.Body)
		}
		return gjson.GetBytes(res.Body, "choices.0.message.content").String()
	}
	sys, u1, u2, u3 := "s:You are terse.", "u:What is the capital of France?", "u:And of Italy?", "u:And of Spain?"
	a1 := "a:" + call(sys, u1)
	call(sys, u1, a1, u2)
	a2 := "a:" + call(sys, u1, a1, u2) // the harness retries the same prompt
	call(sys, u1, a1, u2, a2, u3)
	call(sys, "u:What is the capital of Germany?", a1, u2, a2, u3) // the user edits the first question
	// A new task as long as the thread so far: a fork, not a compaction.
	task := "u:Write a haiku about " + strings.Repeat("autumn leaves falling, ", 12)
	f1 := "a:" + call(sys, task)
	call(sys, task, f1, "u:Another one.")
	return ep.ID
}

// joinMsgs renders "r:content" pieces (s system, u user, a assistant) as
// chat messages.
func joinMsgs(msgs []string) string {
	roles := map[byte]string{'s': "system", 'u': "user", 'a': "assistant"}
	out := ""
	for i, m := range msgs {
		if i > 0 {
			out += ","
		}
		content, _ := json.Marshal(m[2:])
		out += fmt.Sprintf(`{"role":%q,"content":%s}`, roles[m[0]], content)
	}
	return out
}

// servedCalls returns an episode's calls as the episode API serves them.
func servedCalls(t *testing.T, base, id string) []*recorder.Call {
	t.Helper()
	r := proxytest.Do(t, "GET", base+"/orchard/v1/episodes/"+id+"?calls=true",
		map[string]string{"Authorization": "Bearer " + lineageAdmin}, nil)
	var got struct {
		CallList []*recorder.Call `json:"call_list"`
	}
	if err := json.Unmarshal(r.Body, &got); r.Status != http.StatusOK || err != nil {
		t.Fatalf("episode %s: %d %v %s", id, r.Status, err, r.Body)
	}
	return got.CallList
}

func servedLineage(t *testing.T, base, id string) []string {
	t.Helper()
	return lineageKinds(servedCalls(t, base, id))
}

// servedOrder lists the last message of each call, in record order.
func servedOrder(t *testing.T, base, id string) []string {
	t.Helper()
	var out []string
	for _, c := range servedCalls(t, base, id) {
		out = append(out, gjson.GetBytes(c.Request, "messages.@reverse.0.content").String())
	}
	return out
}

// recordedLineage returns the lineage stored with each call at call time.
func recordedLineage(t *testing.T, redisURL, id string) []string {
	t.Helper()
	st, err := openRedis(context.Background(), redisURL, 0, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	calls, err := st.Calls(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return lineageKinds(calls)
}

// lineageKinds writes each call's lineage as "kind<-parent index".
func lineageKinds(calls []*recorder.Call) []string {
	idx := map[string]int{}
	var out []string
	for i, c := range calls {
		idx[c.CallID] = i
		s := "none"
		if c.Lineage != nil {
			s = string(c.Lineage.Kind)
			if p, ok := idx[c.Lineage.ParentCallID]; ok {
				s += fmt.Sprintf("<-%d", p)
			}
		}
		out = append(out, s)
	}
	return out
}
