package client

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/orchard-rl/orchard/envd"
)

// Sandbox is a handle on one sandbox. It is safe for concurrent use.
type Sandbox struct {
	// Info is the sandbox as envd described it at creation.
	Info envd.Sandbox
	c    *Client
}

// ID returns the sandbox id.
func (s *Sandbox) ID() string { return s.Info.ID }

func (s *Sandbox) path(rest string) string {
	return "/envd/v1/sandboxes/" + url.PathEscape(s.Info.ID) + rest
}

// Exec runs a command to completion and returns its result; a non-zero
// exit code is not an error.
func (s *Sandbox) Exec(ctx context.Context, req envd.ExecRequest) (*envd.ExecResult, error) {
	req.Stream = false
	var res envd.ExecResult
	if err := s.c.doJSON(ctx, http.MethodPost, s.path("/exec"), req, &res); err != nil {
		return nil, fmt.Errorf("exec in %s: %w", s.Info.ID, err)
	}
	return &res, nil
}

// Result returns the result of exec id (Running is set while it runs).
func (s *Sandbox) Result(ctx context.Context, execID string) (*envd.ExecResult, error) {
	var res envd.ExecResult
	if err := s.c.doJSON(ctx, http.MethodGet, s.path("/exec/"+url.PathEscape(execID)), nil, &res); err != nil {
		return nil, fmt.Errorf("exec result %s: %w", execID, err)
	}
	return &res, nil
}

// Kill kills the process tree of a running exec.
func (s *Sandbox) Kill(ctx context.Context, execID string) error {
	return s.c.doJSON(ctx, http.MethodPost, s.path("/exec/"+url.PathEscape(execID)+"/kill"), nil, nil)
}

// WriteFile writes data to path in the sandbox (relative paths are under
// the work directory), creating parent directories.
func (s *Sandbox) WriteFile(ctx context.Context, path string, data []byte, mode fs.FileMode) error {
	q := url.Values{"path": {path}, "mode": {fmt.Sprintf("%o", mode.Perm())}}
	rq := request{method: http.MethodPut, path: s.path("/files?" + q.Encode()), body: data, ctype: "application/octet-stream"}
	res, err := s.c.do(ctx, rq)
	if err != nil {
		return fmt.Errorf("write %s in %s: %w", path, s.Info.ID, err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	return res.Body.Close()
}

// ReadFile returns the contents of path in the sandbox.
func (s *Sandbox) ReadFile(ctx context.Context, path string) ([]byte, error) {
	res, err := s.c.do(ctx, request{method: http.MethodGet, path: s.path("/files?" + url.Values{"path": {path}}.Encode())})
	if err != nil {
		return nil, fmt.Errorf("read %s in %s: %w", path, s.Info.ID, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, fmt.Errorf("read %s in %s: %w", path, s.Info.ID, err)
	}
	return b, nil
}

// PutTar extracts the tar archive (optionally gzipped) tarball into dir in
// the sandbox.
func (s *Sandbox) PutTar(ctx context.Context, dir string, tarball []byte) error {
	rq := request{method: http.MethodPut, path: s.path("/tar?" + url.Values{"path": {dir}}.Encode()), body: tarball, ctype: "application/x-tar"}
	res, err := s.c.do(ctx, rq)
	if err != nil {
		return fmt.Errorf("upload tar to %s in %s: %w", dir, s.Info.ID, err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	return res.Body.Close()
}

// GetTar returns dir in the sandbox as an uncompressed tar stream; the
// caller closes it.
func (s *Sandbox) GetTar(ctx context.Context, dir string) (io.ReadCloser, error) {
	res, err := s.c.do(ctx, request{method: http.MethodGet, path: s.path("/tar?" + url.Values{"path": {dir}}.Encode())})
	if err != nil {
		return nil, fmt.Errorf("download %s from %s: %w", dir, s.Info.ID, err)
	}
	return res.Body, nil
}

// UploadDir copies the local directory src into dir in the sandbox.
func (s *Sandbox) UploadDir(ctx context.Context, src, dir string) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.AddFS(os.DirFS(src)); err != nil {
		return fmt.Errorf("tar %s: %w", filepath.Clean(src), err)
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("tar %s: %w", src, err)
	}
	return s.PutTar(ctx, dir, buf.Bytes())
}

// Finish deletes the sandbox and finishes its episode with o.
func (s *Sandbox) Finish(ctx context.Context, o envd.Outcome) (*envd.DeleteResult, error) {
	var res envd.DeleteResult
	if err := s.c.doJSON(ctx, http.MethodDelete, s.path(""), o, &res); err != nil {
		return nil, fmt.Errorf("delete sandbox %s: %w", s.Info.ID, err)
	}
	return &res, nil
}

// Close deletes the sandbox (its episode, if any, is finished with status
// "error" unless Finish ran first). Deleting a sandbox that is already
// gone is not an error.
func (s *Sandbox) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := s.c.doJSON(ctx, http.MethodDelete, s.path(""), nil, nil)
	if e, ok := err.(*envd.Error); ok && e.Status == http.StatusNotFound {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete sandbox %s: %w", s.Info.ID, err)
	}
	return nil
}
