package agent

import (
	"archive/tar"
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orchard-rl/orchard/envd"
)

// newTestServer serves a fresh agent over a real socket.
func newTestServer(t *testing.T, opts Options) (*httptest.Server, string) {
	t.Helper()
	if opts.Workdir == "" {
		opts.Workdir = t.TempDir()
	}
	s := New(opts)
	ts := httptest.NewServer(s)
	t.Cleanup(func() { ts.Close(); s.Close() })
	return ts, opts.Workdir
}

func do(t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, b
}

func execJSON(t *testing.T, url, body string) envd.ExecResult {
	t.Helper()
	code, b := do(t, "POST", url+"/agent/v1/exec", body)
	if code != 200 {
		t.Fatalf("exec %s = %d %s", body, code, b)
	}
	var res envd.ExecResult
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	return res
}

func TestExec(t *testing.T) {
	t.Parallel()
	ts, _ := newTestServer(t, Options{})
	tests := []struct {
		name       string
		body       string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"argv", `{"cmd":["echo","hello world"]}`, 0, "hello world\n", ""},
		{"shell", `{"shell":"echo out; echo err >&2; exit 3"}`, 3, "out\n", "err\n"},
		{"stdin", `{"cmd":["cat"],"stdin":"abc"}`, 0, "abc", ""},
		{"no stdin is eof", `{"cmd":["cat"]}`, 0, "", ""},
		{"env", `{"shell":"echo $FOO","env":{"FOO":"bar"}}`, 0, "bar\n", ""},
		{"cwd", `{"shell":"mkdir -p sub && cd sub && pwd -P | xargs basename"}`, 0, "sub\n", ""},
		{"signal", `{"shell":"kill -9 $$"}`, 137, "", ""},
		{"not found", `{"cmd":["/no/such/binary"]}`, 127, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := execJSON(t, ts.URL, tt.body)
			if got.ExitCode != tt.wantCode || got.Stdout != tt.wantStdout || got.Stderr != tt.wantStderr {
				t.Errorf("exec %s = (%d, %q, %q), want (%d, %q, %q)", tt.body, got.ExitCode, got.Stdout, got.Stderr, tt.wantCode, tt.wantStdout, tt.wantStderr)
			}
			if !strings.HasPrefix(got.ExecID, "x-") {
				t.Errorf("exec id = %q, want x- prefix", got.ExecID)
			}
		})
	}
}

func TestExecBadInput(t *testing.T) {
	t.Parallel()
	ts, _ := newTestServer(t, Options{MaxBody: 64})
	tests := []struct {
		name, body, wantMsg string
		wantStatus          int
	}{
		{"empty", `{}`, "missing command", 400},
		{"both", `{"cmd":["a"],"shell":"b"}`, "either cmd or shell", 400},
		{"unknown field", `{"cmd":["a"],"bogus":1}`, "unknown field", 400},
		{"not json", `nope`, "decode JSON body", 400},
		{"too big", `{"shell":"` + strings.Repeat("x", 100) + `"}`, "larger than 64 bytes", 400},
		{"bad timeout", `{"cmd":["a"],"timeout":"soon"}`, "Go duration", 400},
		{"bad env", `{"cmd":["a"],"env":{"A=B":"c"}}`, "invalid env name", 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, b := do(t, "POST", ts.URL+"/agent/v1/exec", tt.body)
			var e struct {
				Error envd.Error `json:"error"`
			}
			if err := json.Unmarshal(b, &e); err != nil {
				t.Fatalf("body %s: %v", b, err)
			}
			if code != tt.wantStatus || !strings.Contains(e.Error.Message, tt.wantMsg) || e.Error.Type != "invalid_request" {
				t.Errorf("exec %s = %d %s, want %d containing %q", tt.body, code, b, tt.wantStatus, tt.wantMsg)
			}
		})
	}
}

// readEvents parses an SSE body into events.
func readEvents(t *testing.T, r io.Reader) []envd.Event {
	t.Helper()
	var evs []envd.Event
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev envd.Event
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("event %s: %v", data, err)
		}
		evs = append(evs, ev)
	}
	return evs
}

func TestExecStreamAndReattach(t *testing.T) {
	t.Parallel()
	ts, _ := newTestServer(t, Options{})
	code, body := do(t, "POST", ts.URL+"/agent/v1/exec", `{"shell":"printf a; printf b >&2; printf '\\377'","stream":true}`)
	if code != 200 {
		t.Fatalf("stream = %d %s", code, body)
	}
	evs := readEvents(t, bytes.NewReader(body))
	var out, errb bytes.Buffer
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Errorf("event %d seq = %d, want %d", i, ev.Seq, i+1)
		}
		switch ev.Type {
		case envd.EventStdout:
			out.Write(ev.Bytes())
		case envd.EventStderr:
			errb.Write(ev.Bytes())
		}
	}
	if evs[0].Type != envd.EventStart || evs[0].PID == 0 {
		t.Errorf("first event = %+v, want start with pid", evs[0])
	}
	last := evs[len(evs)-1]
	if last.Type != envd.EventEnd || last.Result == nil || last.Result.ExitCode != 0 {
		t.Fatalf("last event = %+v, want end with exit 0", last)
	}
	if out.String() != "a\xff" || errb.String() != "b" {
		t.Errorf("stdout, stderr = %q, %q, want %q, %q", out.String(), errb.String(), "a\xff", "b")
	}
	// Reattach after the start event: the same events follow.
	code, body = do(t, "GET", ts.URL+"/agent/v1/exec/"+last.ExecID+"/events?after=1", "")
	re := readEvents(t, bytes.NewReader(body))
	if code != 200 || len(re) != len(evs)-1 || re[0].Seq != 2 || re[len(re)-1].Type != envd.EventEnd {
		t.Errorf("reattach = %d %d events, want %d from seq 2 ending in end", code, len(re), len(evs)-1)
	}
	code, body = do(t, "GET", ts.URL+"/agent/v1/exec/"+last.ExecID, "")
	var res envd.ExecResult
	_ = json.Unmarshal(body, &res)
	if code != 200 || string(res.StdoutBytes()) != "a\xff" || res.Running {
		t.Errorf("get exec = %d %+v, want stdout a\\xff", code, res)
	}
	if code, _ := do(t, "GET", ts.URL+"/agent/v1/exec/x-nope/events", ""); code != 404 {
		t.Errorf("reattach unknown = %d, want 404", code)
	}
}

// TestExecStreamLive reads events while the command is still running: the
// stream delivers output before the command ends.
func TestExecStreamLive(t *testing.T) {
	t.Parallel()
	ts, dir := newTestServer(t, Options{})
	gate := filepath.Join(dir, "gate")
	body := `{"shell":"echo first; while [ ! -e gate ]; do sleep 0.01; done; echo second","stream":true}`
	res, err := http.Post(ts.URL+"/agent/v1/exec", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	var got []string
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev envd.Event
		_ = json.Unmarshal([]byte(data), &ev)
		got = append(got, ev.Type+":"+ev.Data)
		if ev.Data == "first\n" {
			if err := os.WriteFile(gate, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := "start:|stdout:first\n|stdout:second\n|end:"
	if strings.Join(got, "|") != want {
		t.Errorf("events = %q, want %q", strings.Join(got, "|"), want)
	}
}

// TestTimeoutKillsTree runs a command whose child and setsid grandchild
// would outlive it, and checks that the timeout kills all of them.
func TestTimeoutKillsTree(t *testing.T) {
	t.Parallel()
	ts, dir := newTestServer(t, Options{})
	script := `sleep 300 & echo $! > child.pid; setsid sleep 300 & echo $! > gc.pid; ` +
		`sh -c 'sleep 300 & echo $! > ggc.pid; wait' & while [ ! -s ggc.pid ]; do sleep 0.01; done; echo ready; wait`
	res := execJSON(t, ts.URL, `{"shell":"`+script+`","timeout":"2s"}`)
	if !res.TimedOut || res.ExitCode != 137 || res.Stdout != "ready\n" {
		t.Fatalf("exec = %+v, want timed out, exit 137, stdout ready", res)
	}
	for _, f := range []string{"child.pid", "gc.pid", "ggc.pid"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		// killTree waits (bounded) until the tree is dead; on a saturated
		// CI machine a SIGKILLed process can take longer than that bound
		// to be scheduled and die, so allow it a while more: what must not
		// happen is that it keeps running.
		deadline := time.Now().Add(20 * time.Second)
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if alive(pid) {
			t.Errorf("%s: pid %d still running 20s after the timeout", f, pid)
		}
	}
}

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	_, state, ok := statOf(pid)
	return ok && state != 'Z'
}

func TestFilesAndTar(t *testing.T) {
	t.Parallel()
	ts, dir := newTestServer(t, Options{})
	if code, b := do(t, "PUT", ts.URL+"/agent/v1/files?path=a/b/c.txt&mode=0600", "hello\x00bin"); code != 200 {
		t.Fatalf("put = %d %s", code, b)
	}
	st, err := os.Stat(filepath.Join(dir, "a/b/c.txt"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("stat = %v %v, want mode 0600", st, err)
	}
	if code, b := do(t, "GET", ts.URL+"/agent/v1/files?path="+filepath.Join(dir, "a/b/c.txt"), ""); code != 200 || string(b) != "hello\x00bin" {
		t.Errorf("get = %d %q, want 200 %q", code, b, "hello\x00bin")
	}
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/agent/v1/files?path=missing", 404},
		{"GET", "/agent/v1/files", 400},
		{"GET", "/agent/v1/files?path=a", 400},
		{"PUT", "/agent/v1/files?path=x&mode=999", 400},
		{"GET", "/agent/v1/tar?path=a/b/c.txt", 400},
		{"DELETE", "/agent/v1/files?path=a", 404},
	} {
		if code, b := do(t, tc.method, ts.URL+tc.path, ""); code != tc.want {
			t.Errorf("%s %s = %d %s, want %d", tc.method, tc.path, code, b, tc.want)
		}
	}
	code, tarball := do(t, "GET", ts.URL+"/agent/v1/tar?path=a", "")
	if code != 200 {
		t.Fatalf("get tar = %d", code)
	}
	if code, b := do(t, "PUT", ts.URL+"/agent/v1/tar?path=copy", string(tarball)); code != 200 || !strings.Contains(string(b), `"files":1`) {
		t.Fatalf("put tar = %d %s", code, b)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "copy/b/c.txt")); err != nil || string(b) != "hello\x00bin" {
		t.Errorf("round-tripped file = %q %v", b, err)
	}
	var evil bytes.Buffer
	tw := tar.NewWriter(&evil)
	_ = tw.WriteHeader(&tar.Header{Name: "../escape", Mode: 0o644, Size: 1, Typeflag: tar.TypeReg})
	_, _ = tw.Write([]byte("x"))
	_ = tw.Close()
	if code, b := do(t, "PUT", ts.URL+"/agent/v1/tar?path=evil", evil.String()); code != 400 || !strings.Contains(string(b), "leaves the target") {
		t.Errorf("evil tar = %d %s, want 400", code, b)
	}
	var sym bytes.Buffer
	tw = tar.NewWriter(&sym)
	_ = tw.WriteHeader(&tar.Header{Name: "link", Linkname: "/etc", Typeflag: tar.TypeSymlink})
	_ = tw.WriteHeader(&tar.Header{Name: "link/passwd-copy", Mode: 0o644, Size: 1, Typeflag: tar.TypeReg})
	_, _ = tw.Write([]byte("x"))
	_ = tw.Close()
	if code, b := do(t, "PUT", ts.URL+"/agent/v1/tar?path=sym", sym.String()); code != 400 {
		t.Errorf("symlink escape tar = %d %s, want 400", code, b)
	}
	if _, err := os.Stat("/etc/passwd-copy"); err == nil {
		t.Errorf("tar wrote through a symlink outside its directory")
	}
}

func TestToken(t *testing.T) {
	t.Parallel()
	ts, _ := newTestServer(t, Options{Token: "s3cret"})
	if code, _ := do(t, "GET", ts.URL+"/agent/v1/exec/x-1", ""); code != 401 {
		t.Errorf("no token = %d, want 401", code)
	}
	if code, _ := do(t, "GET", ts.URL+"/agent/v1/health", ""); code != 200 {
		t.Errorf("health without token = %d, want 200", code)
	}
	req, _ := http.NewRequest("GET", ts.URL+"/agent/v1/exec/x-1", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 404 {
		t.Errorf("with token = %d, want 404 (authorized, no such exec)", res.StatusCode)
	}
}

func TestOutputCap(t *testing.T) {
	t.Parallel()
	ts, _ := newTestServer(t, Options{MaxOutput: 10})
	res := execJSON(t, ts.URL, `{"shell":"head -c 100000 /dev/zero | tr '\\0' a"}`)
	if res.Stdout != "aaaaaaaaaa" || !res.Truncated || res.ExitCode != 0 {
		t.Errorf("exec = %q truncated=%v exit=%d, want 10 a's, truncated, 0", res.Stdout, res.Truncated, res.ExitCode)
	}
}

func TestCloseKillsRunning(t *testing.T) {
	t.Parallel()
	s := New(Options{Workdir: t.TempDir()})
	x, err := s.start(&envd.ExecRequest{Cmd: []string{"sleep", "300"}})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	res, done := x.fullResult()
	if !done || res.ExitCode != 137 || res.Error == "" {
		t.Errorf("after Close: %+v done=%v, want killed", res, done)
	}
}
