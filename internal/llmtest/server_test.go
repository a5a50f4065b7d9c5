package llmtest

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func do(t testing.TB, srv *Server, ctx context.Context, path, body string, hdr map[string]string) (*http.Response, []byte, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

const chatStream = `{"model":"text","messages":[{"role":"user","content":"x"}],"stream":true}`

func TestFaultReset(t *testing.T) {
	t.Parallel()
	srv := NewServer(Options{})
	defer srv.Close()
	for _, body := range []string{chatStream, `{"model":"text","messages":[]}`} {
		_, got, err := do(t, srv, context.Background(), "/v1/chat/completions", body, map[string]string{HeaderFault: "reset_after=2"})
		if err == nil {
			t.Fatalf("read after reset: no error, body %q", got)
		}
		if strings.Contains(body, "stream") && strings.Count(string(got), "data: ") != 2 {
			t.Fatalf("got %d events before the reset, want 2: %q", strings.Count(string(got), "data: "), got)
		}
	}
}

func TestFaultHangCanceled(t *testing.T) {
	t.Parallel()
	srv := NewServer(Options{})
	defer srv.Close()
	for i, tc := range []struct{ name, body, fault string }{
		{"stream", chatStream, "hang_after=3"},
		{"json", `{"model":"text","messages":[]}`, "hang_after=0"},
		{"first byte", chatStream, "first_byte_delay=1h"},
		{"chunk delay", chatStream, "chunk_delay=1h"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL()+"/v1/chat/completions", strings.NewReader(tc.body))
			req.Header.Set(HeaderFault, tc.fault)
			req.Header.Set("X-Case", tc.name)
			errc := make(chan error, 1)
			go func() {
				resp, err := srv.Client().Do(req)
				if err == nil {
					_, err = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				errc <- err
			}()
			// Wait until the server holds the request, then go away.
			if err := srv.WaitRequests(context.Background(), i+1); err != nil {
				t.Fatal(err)
			}
			if !hasCase(srv.Requests(), tc.name) {
				t.Fatalf("request %d is not %s", i+1, tc.name)
			}
			cancel()
			if err := <-errc; !errors.Is(err, context.Canceled) {
				t.Fatalf("client error %v, want context.Canceled", err)
			}
			for r := range srv.Canceled() {
				if r.Header.Get("X-Case") == tc.name {
					if !r.Canceled {
						t.Fatalf("request not marked canceled")
					}
					break
				}
			}
		})
	}
}

func hasCase(rs []Request, name string) bool {
	for _, r := range rs {
		if r.Header.Get("X-Case") == name {
			return true
		}
	}
	return false
}

func TestRecordAndTurns(t *testing.T) {
	t.Parallel()
	srv := NewServer(Options{})
	defer srv.Close()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(`{"model":"tools","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"tool","content":"c"}]}`))
	zw.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL()+"/v1/chat/completions?x=1", bytes.NewReader(gz.Bytes()))
	req.Header.Set("Content-Encoding", "gzip")
	req.Header.Set("Authorization", "Bearer k")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "Paris is 18°C and Tokyo is 22°C.") {
		t.Fatalf("turn 1 answer missing: %s", body)
	}
	do(t, srv, context.Background(), "/v1/responses", `{"model":"tools","input":[{"role":"user","content":"a"},{"type":"reasoning"},{"type":"function_call"},{"type":"function_call"},{"type":"function_call_output"}]}`, nil)
	do(t, srv, context.Background(), "/v1/messages", `{"model":"tools","messages":[]}`, map[string]string{HeaderTurn: "7"})
	rs := srv.Requests()
	want := []struct {
		path, query string
		turn        int
	}{{"/v1/chat/completions", "x=1", 1}, {"/v1/responses", "", 1}, {"/v1/messages", "", 1}}
	if len(rs) != len(want) {
		t.Fatalf("%d requests recorded, want %d", len(rs), len(want))
	}
	for i, w := range want {
		if rs[i].Seq != i+1 || rs[i].Path != w.path || rs[i].RawQuery != w.query || rs[i].Turn != w.turn || rs[i].Script != "tools" {
			t.Errorf("request %d = %+v, want %+v", i, rs[i], w)
		}
	}
	if !bytes.Equal(rs[0].Body, gz.Bytes()) || rs[0].Header.Get("Authorization") != "Bearer k" {
		t.Errorf("request 0 body/header not recorded as sent")
	}
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	srv := NewServer(Options{Scripts: map[string]*Script{"only": {Turns: []Turn{{Choice: Choice{Content: Pieces{"x"}}}}}}})
	defer srv.Close()
	tests := []struct {
		name, path, body, fault string
		status                  int
		want                    string
	}{
		{"not json", "/v1/chat/completions", `{`, "", 400, `{"error":{"message":"request body is not a JSON object","type":"invalid_request_error","param":null,"code":null}}`},
		{"no script", "/v1/chat/completions", `{"model":"zzz"}`, "", 404, `{"error":{"message":"the model ` + "`zzz`" + ` does not exist","type":"invalid_request_error","param":null,"code":null}}`},
		{"bad fault", "/v1/chat/completions", `{"model":"only"}`, "explode=1", 400, `{"error":{"message":"fault \"explode=1\": unknown key","type":"invalid_request_error","param":null,"code":null}}`},
		{"anthropic 404", "/v1/messages", `{"model":"zzz"}`, "", 404, `{"type":"error","error":{"type":"not_found_error","message":"the model ` + "`zzz`" + ` does not exist"},"request_id":"req_llmtest"}`},
		{"no route", "/v2/x", `{}`, "", 404, `{"error":{"message":"no route for POST /v2/x","type":"invalid_request_error","param":null,"code":null}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, got, err := do(t, srv, context.Background(), tc.path, tc.body, map[string]string{HeaderFault: tc.fault})
			if err != nil || resp.StatusCode != tc.status || string(got) != tc.want {
				t.Errorf("%s = %v %d %s, want %d %s", tc.path, err, resp.StatusCode, got, tc.status, tc.want)
			}
		})
	}
	resp, err := srv.Client().Get(srv.URL() + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `{"object":"list","data":[{"id":"only","object":"model","created":1767225600,"owned_by":"llmtest"}]}`; string(got) != want {
		t.Errorf("models = %s, want %s", got, want)
	}
}

func TestScriptErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, script, want string }{
		{"unknown field", `{"turns":[{"contnet":"x"}]}`, `unknown field "contnet"`},
		{"no turns", `{"turns":[]}`, "no turns"},
		{"ids count", `{"turns":[{"content":["a","b"],"token_ids":[1]}]}`, "1 token_ids for 2 pieces"},
		{"bad args", `{"turns":[{"tool_calls":[{"id":"c","name":"n","arguments":"[1]"}]}]}`, "are not a JSON object"},
		{"profile", `{"profile":"tgi","turns":[{}]}`, `unknown profile "tgi"`},
		{"fault", `{"fault":"status=9","turns":[{}]}`, "out of range"},
	}
	dir := t.TempDir()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".json")
			os.WriteFile(p, []byte(tc.script), 0o644)
			if _, err := ParseScript(p); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseScript(%s) error = %v, want %q", tc.script, err, tc.want)
			}
		})
	}
}
