package orchardenv

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/orchard-rl/orchard/envd"
)

// maxUpload caps an upload body; its content is base64, 4/3 of the file.
const maxUpload = 48 << 20

type uploadReq struct {
	Path    string  `json:"path"`
	Content *string `json:"content"`
}

func (h *Handler) upload(w http.ResponseWriter, r *http.Request) {
	var req uploadReq
	if err := decode(w, r, maxUpload, &req); err != nil {
		writeError(w, err)
		return
	}
	if req.Path == "" || req.Content == nil {
		writeError(w, envd.Errorf(envd.ErrBadRequest, `fields "path" and "content" (base64) are required`))
		return
	}
	data, err := base64.StdEncoding.DecodeString(*req.Content)
	if err != nil {
		writeError(w, envd.Errorf(envd.ErrBadRequest, `field "content": not valid base64: %v`, err))
		return
	}
	_, info, err := h.lookup(r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	c := agentCall{method: http.MethodPut, rest: "files", query: url.Values{"path": {req.Path}},
		ctype: "application/octet-stream", body: data}
	if _, err := h.call(r.Context(), info.ID, c); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "path": req.Path, "size": len(data)})
}

func (h *Handler) download(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Query().Get("path")
	if p == "" {
		writeError(w, envd.Errorf(envd.ErrBadRequest, `query parameter "path" is required`))
		return
	}
	_, info, err := h.lookup(r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	a, err := h.call(r.Context(), info.ID, agentCall{method: http.MethodGet, rest: "files", query: url.Values{"path": {p}}})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"path": p, "content": base64.StdEncoding.EncodeToString(a.body), "size": len(a.body)})
}

// listScript prints one record per entry of directory $1: the name, a
// NUL, then "type|size|mtime" (stat -L, falling back to the link itself)
// and a newline. Exit 3: no such path; 4: not a directory. It needs only
// a POSIX shell and stat (coreutils or busybox), so it runs in any image.
const listScript = `cd -- "$1" 2>/dev/null || { [ -e "$1" ] && exit 4; exit 3; }
for f in * .[!.]* ..?*; do
  [ -e "$f" ] || [ -L "$f" ] || continue
  printf '%s\0' "$f"
  stat -L -c '%F|%s|%Y' -- "$f" 2>/dev/null || stat -c '%F|%s|%Y' -- "$f"
done`

// fileInfo is Orchard's FileInfo.
type fileInfo struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Size     int64  `json:"size"`
	Modified string `json:"modified"`
}

func (h *Handler) list(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Query().Get("path")
	if p == "" {
		p = Workdir
	}
	_, info, err := h.lookup(r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	var res envd.ExecResult
	er := envd.ExecRequest{Cmd: []string{"/bin/sh", "-c", listScript, "sh", p}, Timeout: envd.Duration(time.Minute)}
	if err := h.callJSON(r.Context(), info.ID, "exec", er, &res); err != nil {
		writeError(w, err)
		return
	}
	switch {
	case res.ExitCode == 3:
		err = notFound("Path not found: %s", p)
	case res.ExitCode == 4:
		err = envd.Errorf(envd.ErrBadRequest, "Not a directory: %s", p)
	case res.ExitCode != 0 || res.Error != "":
		err = envd.Errorf(envd.ErrUpstream, "list %s: exit %d: %s%s", p, res.ExitCode, res.Stderr, res.Error)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"path": p, "files": parseList(res.StdoutBytes())})
}

// parseList reads listScript's output, sorted by name as Orchard's
// agent sorts (Python's sorted(Path.iterdir())).
func parseList(out []byte) []fileInfo {
	files := []fileInfo{}
	for len(out) > 0 {
		name, rest, ok := bytes.Cut(out, []byte{0})
		if !ok {
			break
		}
		meta, rest2, _ := bytes.Cut(rest, []byte{'\n'})
		out = rest2
		parts := strings.Split(string(meta), "|")
		if len(parts) != 3 {
			continue
		}
		fi := fileInfo{Name: path.Base("/" + string(name)), Type: "file"}
		if parts[0] == "directory" {
			fi.Type = "directory"
		}
		fi.Size, _ = strconv.ParseInt(parts[1], 10, 64)
		if sec, err := strconv.ParseInt(parts[2], 10, 64); err == nil {
			fi.Modified = time.Unix(sec, 0).UTC().Format("2006-01-02T15:04:05")
		}
		files = append(files, fi)
	}
	slices.SortFunc(files, func(a, b fileInfo) int { return strings.Compare(a.Name, b.Name) })
	return files
}

type patchReq struct {
	Patch          *string  `json:"patch"`
	TimeoutSeconds *float64 `json:"timeout_seconds"`
}

// patchScript applies the patch on stdin in the work directory: with
// git apply as Orchard does, or patch -p1 where the image has no git.
const patchScript = `if command -v git >/dev/null 2>&1; then exec git apply -; fi; exec patch -p1 --batch`

func (h *Handler) applyPatch(w http.ResponseWriter, r *http.Request) {
	var req patchReq
	if err := decode(w, r, 16<<20, &req); err != nil {
		writeError(w, err)
		return
	}
	if req.Patch == nil || *req.Patch == "" {
		writeError(w, envd.Errorf(envd.ErrBadRequest, `field "patch" is required`))
		return
	}
	timeout := seconds(req.TimeoutSeconds, 30*time.Second) // Orchard's apply_patch default
	_, info, err := h.lookup(r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	patch := *req.Patch
	if !strings.HasSuffix(patch, "\n") {
		patch += "\n" // Orchard's heredoc ends the patch with a newline
	}
	var res envd.ExecResult
	er := envd.ExecRequest{Cmd: []string{"/bin/sh", "-c", patchScript}, Stdin: &patch, Timeout: envd.Duration(timeout)}
	if err := h.callJSON(r.Context(), info.ID, "exec", er, &res); err != nil {
		writeJSON(w, http.StatusOK, map[string]any{"success": false, "stdout": "", "stderr": "", "exit_code": nil, "error": err.Error()})
		return
	}
	out := map[string]any{"success": res.ExitCode == 0 && res.Error == "" && !res.TimedOut,
		"stdout": res.Stdout, "stderr": res.Stderr, "exit_code": res.ExitCode, "error": nil}
	if res.Error != "" {
		out["error"] = res.Error
	}
	writeJSON(w, http.StatusOK, out)
}
