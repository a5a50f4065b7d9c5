package orchardenv_test

import (
	"encoding/base64"
	"strings"
	"testing"
)

func TestSandboxLifecycle(t *testing.T) {
	a := newAPI(t)
	out := a.must(t, 200, "POST", "/sandboxes", map[string]any{"image": "default", "block_network": false, "cpu": "1", "memory": "256Mi", "timeout": 60})
	id := out["sandbox_id"].(string)
	for k, want := range map[string]any{"image": "default", "block_network": false, "cpu": "1", "memory": "256Mi", "timeout": 60.0, "status": "ready"} {
		if out[k] != want {
			t.Errorf("create: %s = %v, want %v", k, out[k], want)
		}
	}
	if got := a.must(t, 200, "GET", "/sandboxes/"+id, nil); got["ready"] != true || got["sandbox_id"] != id || got["workdir"] != "/workspace" {
		t.Errorf("get = %v, want ready sandbox %s in /workspace", got, id)
	}
	if got := a.must(t, 200, "GET", "/sandboxes/"+id+"/wait?timeout=5", nil); got["status"] != "ready" {
		t.Errorf("wait = %v, want status ready", got)
	}
	if got := a.must(t, 200, "DELETE", "/sandboxes/"+id, nil); got["status"] != "deleted" || got["sandbox_id"] != id {
		t.Errorf("delete = %v", got)
	}
	got := a.must(t, 404, "GET", "/sandboxes/"+id, nil)
	if got["detail"] != "Sandbox "+id+" not found" {
		t.Errorf("get after delete: detail = %q", got["detail"])
	}
	a.must(t, 404, "DELETE", "/sandboxes/"+id, nil)
}

func TestCustomSandboxID(t *testing.T) {
	a := newAPI(t)
	body := map[string]any{"image": "default", "sandbox_id": "myapp-1"}
	if out := a.must(t, 200, "POST", "/sandboxes", body); out["sandbox_id"] != "myapp-1" || out["block_network"] != true {
		t.Fatalf("create = %v, want sandbox myapp-1 with block_network true (the default)", out)
	}
	a.must(t, 409, "POST", "/sandboxes", body)
	a.must(t, 200, "POST", "/sandboxes/myapp-1/heartbeat", nil)
	a.must(t, 200, "DELETE", "/sandboxes/myapp-1", nil)
}

func TestHeartbeat(t *testing.T) {
	a := newAPI(t)
	id := a.sandbox(t)
	if got := a.must(t, 200, "POST", "/sandboxes/"+id+"/heartbeat", nil); got["status"] != "ok" || got["sandbox_id"] != id {
		t.Errorf("heartbeat = %v", got)
	}
	a.must(t, 404, "POST", "/sandboxes/nope/heartbeat", nil)
}

func TestExecWait(t *testing.T) {
	a := newAPI(t)
	id := a.sandbox(t)
	tests := []struct {
		name    string
		command any
		status  string
		exit    float64
		stdout  string
	}{
		{"string", "echo hello; echo err >&2", "succeeded", 0, "hello\n"},
		{"list", []string{"echo", "a", "b"}, "succeeded", 0, "a b\n"},
		{"bash", "[[ 1 == 1 ]] && echo bash", "succeeded", 0, "bash\n"},
		{"exit code", "exit 3", "failed", 3, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := a.must(t, 200, "POST", "/sandboxes/"+id+"/exec", map[string]any{"command": tt.command, "wait": true})
			if got["status"] != tt.status || got["exit_code"] != tt.exit || got["stdout"] != tt.stdout || got["sandbox_id"] != id {
				t.Errorf("exec = %v, want status %s exit %v stdout %q", got, tt.status, tt.exit, tt.stdout)
			}
		})
	}
	got := a.must(t, 200, "POST", "/sandboxes/"+id+"/exec", map[string]any{"command": "echo $FOO; pwd", "env": map[string]string{"FOO": "bar"}, "cwd": "/tmp", "wait": true})
	if got["stdout"] != "bar\n/tmp\n" || got["stderr"] != "" {
		t.Errorf("exec with env and cwd = %v", got)
	}
}

func TestExecTimeout(t *testing.T) {
	a := newAPI(t)
	id := a.sandbox(t)
	got := a.must(t, 200, "POST", "/sandboxes/"+id+"/exec", map[string]any{"command": "sleep 30", "timeout_seconds": 0.2, "wait": true})
	if got["status"] != "failed" || got["exit_code"] != 124.0 || got["error"] != "Command timed out after 0.2s" {
		t.Errorf("timed out exec = %v, want failed, exit 124", got)
	}
}

// TestJobPolling runs a command that waits for a file: polling sees it
// running, a server-side wait that runs out answers 408 with status
// running, and once the file is uploaded the wait returns it succeeded.
func TestJobPolling(t *testing.T) {
	a := newAPI(t)
	id := a.sandbox(t)
	out := a.must(t, 200, "POST", "/sandboxes/"+id+"/exec", map[string]any{"command": "while [ ! -f go ]; do sleep 0.02; done; cat go"})
	jid, _ := out["job_id"].(string)
	if out["status"] != "queued" || len(jid) != 36 {
		t.Fatalf("exec wait=false = %v, want a job id and status queued", out)
	}
	if got := a.must(t, 408, "GET", "/jobs/"+jid+"/wait?timeout=0.2", nil); got["status"] != "running" || got["exit_code"] != nil || got["started_at"] == nil {
		t.Errorf("wait that ran out = %v, want status running", got)
	}
	if got := a.must(t, 200, "GET", "/jobs/"+jid, nil); got["status"] != "running" || got["command"] != "while [ ! -f go ]; do sleep 0.02; done; cat go" {
		t.Errorf("get job = %v, want running", got)
	}
	a.must(t, 200, "POST", "/sandboxes/"+id+"/files", map[string]any{"path": "go", "content": base64.StdEncoding.EncodeToString([]byte("done"))})
	got := a.must(t, 200, "GET", "/jobs/"+jid+"/wait?timeout=30", nil)
	if got["status"] != "succeeded" || got["stdout"] != "done" || got["exit_code"] != 0.0 || got["completed_at"] == nil {
		t.Errorf("wait = %v, want succeeded with stdout done", got)
	}
	if got := a.must(t, 200, "GET", "/jobs/"+jid, nil); got["status"] != "succeeded" {
		t.Errorf("get finished job = %v", got)
	}
}

func TestFiles(t *testing.T) {
	a := newAPI(t)
	id := a.sandbox(t)
	data := []byte("bin\x00\xff\x01data\n")
	up := a.must(t, 200, "POST", "/sandboxes/"+id+"/files", map[string]any{"path": "sub/x.bin", "content": base64.StdEncoding.EncodeToString(data)})
	if up["success"] != true || up["size"] != float64(len(data)) || up["path"] != "sub/x.bin" {
		t.Errorf("upload = %v", up)
	}
	down := a.must(t, 200, "GET", "/sandboxes/"+id+"/files?path=sub/x.bin", nil)
	if got, _ := base64.StdEncoding.DecodeString(down["content"].(string)); string(got) != string(data) || down["size"] != float64(len(data)) {
		t.Errorf("download = %v, want the uploaded bytes", down)
	}
	a.must(t, 200, "POST", "/sandboxes/"+id+"/files", map[string]any{"path": ".hidden", "content": ""})
	list := a.must(t, 200, "GET", "/sandboxes/"+id+"/files/list?path=.", nil)
	files, _ := list["files"].([]any)
	var got []string
	for _, f := range files {
		m := f.(map[string]any)
		got = append(got, m["name"].(string)+":"+m["type"].(string))
		if m["name"] == "sub" && (m["modified"] == "" || m["size"] == nil) {
			t.Errorf("list entry %v lacks modified or size", m)
		}
	}
	if strings.Join(got, ",") != ".hidden:file,sub:directory" {
		t.Errorf("list = %v, want .hidden:file,sub:directory", got)
	}
	a.must(t, 404, "GET", "/sandboxes/"+id+"/files?path=missing", nil)
	a.must(t, 404, "GET", "/sandboxes/"+id+"/files/list?path=missing", nil)
	a.must(t, 400, "GET", "/sandboxes/"+id+"/files/list?path=sub/x.bin", nil)
}

func TestApplyPatch(t *testing.T) {
	a := newAPI(t)
	id := a.sandbox(t)
	a.must(t, 200, "POST", "/sandboxes/"+id+"/files", map[string]any{"path": "file.txt", "content": base64.StdEncoding.EncodeToString([]byte("line1\n"))})
	patch := "--- a/file.txt\n+++ b/file.txt\n@@ -1 +1,2 @@\n line1\n+line2" // api.md's example, no final newline
	got := a.must(t, 200, "POST", "/sandboxes/"+id+"/apply_patch", map[string]any{"patch": patch, "timeout_seconds": 30})
	if got["success"] != true || got["exit_code"] != 0.0 {
		t.Fatalf("apply_patch = %v, want success", got)
	}
	down := a.must(t, 200, "GET", "/sandboxes/"+id+"/files?path=file.txt", nil)
	if b, _ := base64.StdEncoding.DecodeString(down["content"].(string)); string(b) != "line1\nline2\n" {
		t.Errorf("patched file = %q, want %q", b, "line1\nline2\n")
	}
	if got := a.must(t, 200, "POST", "/sandboxes/"+id+"/apply_patch", map[string]any{"patch": patch}); got["success"] != false || got["exit_code"] == 0.0 {
		t.Errorf("applying the patch twice = %v, want success false", got)
	}
}

func TestAPIKey(t *testing.T) {
	a := newAPI(t, "k-123")
	a.must(t, 200, "POST", "/sandboxes", map[string]any{"image": "default"})
	a.key = ""
	if got := a.must(t, 401, "POST", "/sandboxes", map[string]any{"image": "default"}); !strings.Contains(got["detail"].(string), "X-API-Key") {
		t.Errorf("no key: detail = %v", got["detail"])
	}
	a.must(t, 200, "GET", "/health", nil)
	a.must(t, 200, "GET", "/", nil)
	a.key = "wrong"
	a.must(t, 403, "GET", "/jobs/x", nil)
}

func TestBadInput(t *testing.T) {
	a := newAPI(t)
	id := a.sandbox(t)
	tests := []struct {
		name, method, path string
		body               any
		status             int
		detail             string // substring
	}{
		{"unknown sandbox", "GET", "/sandboxes/sb-nope", nil, 404, "Sandbox sb-nope not found"},
		{"unknown sandbox exec", "POST", "/sandboxes/sb-nope/exec", map[string]any{"command": "true"}, 404, "Sandbox sb-nope not found"},
		{"unknown job", "GET", "/jobs/j-nope", nil, 404, "Job j-nope not found"},
		{"unknown job wait", "GET", "/jobs/j-nope/wait", nil, 404, "Job j-nope not found"},
		{"no image", "POST", "/sandboxes", map[string]any{}, 400, `field "image" is required`},
		{"image type", "POST", "/sandboxes", `{"image": 5}`, 400, `field "image": want a string`},
		{"registry image on local", "POST", "/sandboxes", map[string]any{"image": "ubuntu:22.04"}, 400, `field "image" "ubuntu:22.04"`},
		{"block_network type", "POST", "/sandboxes", `{"image":"default","block_network":"yes"}`, 400, `field "block_network": want true or false`},
		{"not JSON", "POST", "/sandboxes", `{"image":`, 400, "not a JSON object"},
		{"empty body", "POST", "/sandboxes/" + id + "/exec", "", 400, "empty body"},
		{"no command", "POST", "/sandboxes/" + id + "/exec", map[string]any{"wait": true}, 400, `field "command" is required`},
		{"command type", "POST", "/sandboxes/" + id + "/exec", map[string]any{"command": 5}, 400, `field "command": want a string or a list of strings`},
		{"timeout type", "POST", "/sandboxes/" + id + "/exec", map[string]any{"command": "true", "timeout_seconds": "x"}, 400, `field "timeout_seconds": want a number`},
		{"bad base64", "POST", "/sandboxes/" + id + "/files", map[string]any{"path": "x", "content": "%%%"}, 400, `field "content": not valid base64`},
		{"no patch", "POST", "/sandboxes/" + id + "/apply_patch", map[string]any{}, 400, `field "patch" is required`},
		{"no path", "GET", "/sandboxes/" + id + "/files", nil, 400, `query parameter "path" is required`},
		{"bad wait timeout", "GET", "/sandboxes/" + id + "/wait?timeout=x", nil, 400, `query parameter "timeout"`},
		{"no route", "GET", "/nope", nil, 404, "no route GET /nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, got := a.do(t, tt.method, tt.path, tt.body)
			detail, _ := got["detail"].(string)
			if status != tt.status || !strings.Contains(detail, tt.detail) {
				t.Errorf("%s %s = %d %q, want %d with %q", tt.method, tt.path, status, detail, tt.status, tt.detail)
			}
			if e, _ := got["error"].(map[string]any); e == nil || e["message"] != detail {
				t.Errorf("error body %v: want error.message equal to detail", got)
			}
		})
	}
}
