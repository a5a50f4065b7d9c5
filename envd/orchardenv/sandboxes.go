package orchardenv

import (
	"context"
	"net/http"
	"path"
	"regexp"
	"strconv"
	"time"

	"github.com/orchard-rl/orchard/envd"
)

// Workdir is the work directory of sandboxes created through this API:
// Orchard's default_working_dir, where its users' commands expect to run.
const Workdir = "/workspace"

// defaultReadyTimeout is Orchard's create timeout default (seconds).
const defaultReadyTimeout = 3600

// sandbox is what this API remembers of a sandbox it created: the
// Orchard id (the caller's sandbox_id, or envd's id) and the request.
type sandbox struct {
	id, envdID   string // envdID is "" while the create runs
	image        string
	blockNetwork bool
	cpu, memory  string
	timeout      int
}

// createReq is the body of POST /sandboxes (Orchard CreateSandboxRequest).
type createReq struct {
	Image        *string  `json:"image"`
	BlockNetwork *bool    `json:"block_network"`
	SandboxID    string   `json:"sandbox_id"`
	CPU          string   `json:"cpu"`
	Memory       string   `json:"memory"`
	Timeout      *float64 `json:"timeout"`
}

var validID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

func (h *Handler) create(w http.ResponseWriter, r *http.Request) {
	var req createReq
	if err := decode(w, r, 1<<20, &req); err != nil {
		writeError(w, err)
		return
	}
	sb, spec, err := h.newSandbox(&req)
	if err != nil {
		writeError(w, err)
		return
	}
	if sb.id != "" {
		if err := h.reserve(sb); err != nil {
			writeError(w, err)
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), time.Duration(sb.timeout)*time.Second)
	defer cancel()
	info, err := h.opts.Manager.Create(ctx, spec)
	if err != nil {
		if sb.id != "" {
			h.forget(sb.id)
		}
		if status, _ := envd.StatusFor(err); status >= 500 {
			h.opts.Logger.Warn("create sandbox failed", "sandbox", sb.id, "err", err)
		}
		writeError(w, err)
		return
	}
	h.mu.Lock()
	sb.envdID = info.ID
	if sb.id == "" {
		sb.id = info.ID
	}
	h.sandboxes[sb.id] = sb
	h.mu.Unlock()
	writeJSON(w, http.StatusOK, sb.view(info))
}

// newSandbox validates req and maps it to an envd spec.
func (h *Handler) newSandbox(req *createReq) (*sandbox, envd.Spec, error) {
	switch {
	case req.Image == nil || *req.Image == "":
		return nil, envd.Spec{}, envd.Errorf(envd.ErrBadRequest, `field "image" is required`)
	case req.SandboxID != "" && !validID.MatchString(req.SandboxID):
		return nil, envd.Spec{}, envd.Errorf(envd.ErrBadRequest, `field "sandbox_id" %q: use 1-128 characters of A-Z a-z 0-9 . _ - (starting with a letter or digit)`, req.SandboxID)
	case req.Timeout != nil && *req.Timeout <= 0:
		return nil, envd.Spec{}, envd.Errorf(envd.ErrBadRequest, `field "timeout": want a positive number of seconds`)
	}
	image, err := h.image(*req.Image)
	if err != nil {
		return nil, envd.Spec{}, err
	}
	sb := &sandbox{id: req.SandboxID, image: *req.Image, blockNetwork: req.BlockNetwork == nil || *req.BlockNetwork,
		cpu: req.CPU, memory: req.Memory, timeout: defaultReadyTimeout}
	if req.Timeout != nil {
		sb.timeout = int(*req.Timeout)
	}
	spec := envd.Spec{Image: image, Workdir: Workdir, Network: h.network(sb.blockNetwork),
		Resources: envd.Resources{CPU: req.CPU, Memory: req.Memory}, Labels: map[string]string{"orchard-env": "1"}}
	return sb, spec, nil
}

// image maps an Orchard image name to what the backend runs.
func (h *Handler) image(name string) (string, error) {
	if h.opts.Backend == BackendKubernetes {
		return name, nil
	}
	switch {
	case name == "default":
		return "", nil // the local backend's default root: the host's system directories, secrets left out
	case path.IsAbs(name):
		return path.Clean(name), nil
	}
	return "", envd.Errorf(envd.ErrBadRequest, `field "image" %q: the local backend runs "default" (its minimal root) or the absolute path of an OCI image layout directory or a docker save / OCI tarball; registry images need the kubernetes backend`, name)
}

// network maps block_network to an envd network mode. Blocking gives the
// most restrictive mode in which the harness still reaches the proxy
// ("proxy": its own network namespace, only its episode's model routes
// forwarded); see docs/orchard-env-compat.md.
func (h *Handler) network(block bool) string {
	switch {
	case block:
		return envd.NetworkProxy
	case h.opts.Backend == BackendLocal:
		return "host"
	}
	return ""
}

// reserve claims sb.id, failing when it is taken.
func (h *Handler) reserve(sb *sandbox) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.sandboxes[sb.id]; ok {
		return envd.Errorf(envd.ErrConflict, "sandbox %s already exists", sb.id)
	}
	if _, err := h.opts.Manager.Get(sb.id); err == nil {
		return envd.Errorf(envd.ErrConflict, "sandbox %s already exists", sb.id)
	}
	h.sandboxes[sb.id] = sb
	return nil
}

func (h *Handler) forget(id string) {
	h.mu.Lock()
	delete(h.sandboxes, id)
	h.mu.Unlock()
}

// lookup resolves an Orchard sandbox id: one this API created, or any
// envd sandbox by its own id.
func (h *Handler) lookup(id string) (*sandbox, envd.Sandbox, error) {
	h.mu.Lock()
	sb, ok := h.sandboxes[id]
	h.mu.Unlock()
	envdID := id
	if ok && sb.envdID != "" {
		envdID = sb.envdID
	}
	info, err := h.opts.Manager.Get(envdID)
	if err != nil || (ok && sb.envdID == "") {
		if ok && sb.envdID != "" {
			h.forget(id) // reaped by envd (ttl or idleness)
		}
		return nil, envd.Sandbox{}, notFound("Sandbox %s not found", id)
	}
	if !ok {
		sb = &sandbox{id: id, image: info.Image, blockNetwork: false}
	}
	return sb, info, nil
}

// view is the Orchard sandbox object, with envd's fields beside it.
func (sb *sandbox) view(info envd.Sandbox) map[string]any {
	return map[string]any{
		"sandbox_id": sb.id, "namespace": info.Backend, "image": sb.image, "pod_name": info.ID,
		"block_network": sb.blockNetwork, "cpu": sb.cpu, "memory": sb.memory, "timeout": sb.timeout,
		"created_at": unixSeconds(info.CreatedAt), "ready": true, "status": "ready", "status_message": "",
		"workdir": info.Workdir, "expires_at": unixSeconds(info.ExpiresAt), "warnings": info.Warnings,
	}
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixMicro()) / 1e6 }

func (h *Handler) get(w http.ResponseWriter, r *http.Request) {
	sb, info, err := h.lookup(r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sb.view(info))
}

// waitSandbox answers at once: envd's create returns only once the
// sandbox's agent answers, so an existing sandbox is always ready.
func (h *Handler) waitSandbox(w http.ResponseWriter, r *http.Request) {
	if _, err := queryTimeout(r, defaultReadyTimeout); err != nil {
		writeError(w, err)
		return
	}
	h.get(w, r)
}

func (h *Handler) delete(w http.ResponseWriter, r *http.Request) {
	sb, info, err := h.lookup(r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	if _, err := h.opts.Manager.Delete(r.Context(), info.ID, nil); err != nil {
		writeError(w, err)
		return
	}
	h.forget(sb.id)
	writeJSON(w, http.StatusOK, map[string]string{"status": "deleted", "sandbox_id": sb.id})
}

// heartbeat marks the sandbox used (a request through the Manager resets
// its idle timer) by asking its agent for health.
func (h *Handler) heartbeat(w http.ResponseWriter, r *http.Request) {
	sb, info, err := h.lookup(r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	if _, err := h.call(r.Context(), info.ID, agentCall{method: http.MethodGet, rest: "health"}); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "sandbox_id": sb.id})
}

// queryTimeout reads ?timeout= (seconds, default def).
func queryTimeout(r *http.Request, def float64) (time.Duration, error) {
	s := r.URL.Query().Get("timeout")
	if s == "" {
		return time.Duration(def * float64(time.Second)), nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 {
		return 0, envd.Errorf(envd.ErrBadRequest, "query parameter \"timeout\" %q: want a non-negative number of seconds", s)
	}
	return time.Duration(v * float64(time.Second)), nil
}
