package agent

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/orchard-rl/orchard/envd"
)

// errEscape is the message os.Root gives when a path (through a symlink
// or "..") would leave the root.
const errEscape = "path escapes from parent"

// queryPath resolves ?path= of r inside the work directory. It returns
// the work dir as an [os.Root] (the caller closes it), the path relative
// to it, and the absolute path for messages. Paths outside the work dir
// get a 403 naming the rule.
func (s *Server) queryPath(r *http.Request) (*os.Root, string, string, error) {
	p := r.URL.Query().Get("path")
	if p == "" {
		return nil, "", "", envd.Errorf(envd.ErrBadRequest, "missing ?path= (absolute, or relative to the work directory)")
	}
	rel, err := s.confine(p)
	if err != nil {
		return nil, "", "", err
	}
	root, err := os.OpenRoot(s.opts.Workdir)
	if err != nil {
		return nil, "", "", fileError(s.opts.Workdir, err)
	}
	return root, rel, filepath.Join(s.opts.Workdir, rel), nil
}

// confine maps p (absolute, or relative to the work dir) to a path
// relative to the work dir, refusing one that leaves it.
func (s *Server) confine(p string) (string, error) {
	if filepath.IsAbs(p) {
		rel, err := filepath.Rel(s.opts.Workdir, filepath.Clean(p))
		if err != nil || !filepath.IsLocal(rel) && rel != "." {
			return "", forbidden("%s is outside the work directory %s (rule: the files API reaches only the work directory)", p, s.opts.Workdir)
		}
		return rel, nil
	}
	if !filepath.IsLocal(p) {
		return "", forbidden("%s leaves the work directory (rule: no \"..\" out of the work directory)", p)
	}
	return filepath.Clean(p), nil
}

func forbidden(format string, args ...any) error {
	return &envd.Error{Status: http.StatusForbidden, Type: "forbidden", Message: fmt.Sprintf(format, args...)}
}

// fileError maps a filesystem error to an envd error for path p.
func fileError(p string, err error) error {
	switch {
	case err != nil && strings.Contains(err.Error(), errEscape):
		return forbidden("%s: a symlink on this path leads outside the work directory (rule: symlinks are not followed out of the work directory)", p)
	case errors.Is(err, fs.ErrNotExist):
		return envd.Errorf(envd.ErrNotFound, "%s: no such file or directory", p)
	case errors.Is(err, fs.ErrPermission):
		return &envd.Error{Status: http.StatusForbidden, Type: "permission_denied", Message: fmt.Sprintf("%s: permission denied", p)}
	}
	return &envd.Error{Status: http.StatusUnprocessableEntity, Type: "file_error", Message: err.Error()}
}

// handlePutFile writes the request body to ?path=, creating parent
// directories; ?mode= (octal, default 0644) sets the permission bits. The
// file is written under a temporary name and renamed, so readers never see
// half of it.
func (s *Server) handlePutFile(w http.ResponseWriter, r *http.Request) {
	root, rel, p, err := s.queryPath(r)
	if err != nil {
		envd.WriteError(w, err)
		return
	}
	defer root.Close()
	mode := os.FileMode(0o644)
	if m := r.URL.Query().Get("mode"); m != "" {
		v, err := strconv.ParseUint(m, 8, 32)
		if err != nil || v > 0o7777 {
			envd.WriteError(w, envd.Errorf(envd.ErrBadRequest, "mode=%q: want octal permission bits like 0755", m))
			return
		}
		mode = os.FileMode(v)
	}
	n, err := writeInRoot(root, rel, r.Body, mode)
	if err != nil {
		envd.WriteError(w, fileError(p, err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"path": p, "size": n})
}

// writeInRoot writes name under root through a temporary file and a
// rename; neither follows a symlink out of root.
func writeInRoot(root *os.Root, name string, body io.Reader, mode os.FileMode) (int64, error) {
	if err := root.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return 0, err
	}
	// The rename would replace a symlink, not write through it; refusing
	// one that leads out says so instead of silently replacing it.
	if _, err := root.Stat(name); err != nil && strings.Contains(err.Error(), errEscape) {
		return 0, err
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(filepath.Dir(name), ".orchard-put-"+hex.EncodeToString(rnd[:]))
	f, err := root.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, body)
	if err == nil {
		err = f.Chmod(mode)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, name)
	}
	if err != nil {
		_ = root.Remove(tmp)
		return 0, err
	}
	return n, nil
}

func writeFileAtomic(p string, body io.Reader, mode os.FileMode) (int64, error) {
	root, err := os.OpenRoot(filepath.Dir(p))
	if err != nil {
		return 0, err
	}
	defer root.Close()
	return writeInRoot(root, filepath.Base(p), body, mode)
}

// handleGetFile sends the file at ?path=.
func (s *Server) handleGetFile(w http.ResponseWriter, r *http.Request) {
	root, rel, p, err := s.queryPath(r)
	if err != nil {
		envd.WriteError(w, err)
		return
	}
	defer root.Close()
	f, err := root.Open(rel)
	if err != nil {
		envd.WriteError(w, fileError(p, err))
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		envd.WriteError(w, fileError(p, err))
		return
	}
	if st.IsDir() {
		envd.WriteError(w, envd.Errorf(envd.ErrBadRequest, "%s is a directory; download it with GET .../tar?path=", p))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	if st.Mode().IsRegular() {
		w.Header().Set("Content-Length", strconv.FormatInt(st.Size(), 10))
	}
	w.Header().Set("X-File-Mode", fmt.Sprintf("%04o", st.Mode().Perm()))
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, f)
}

// handlePutTar extracts a tar archive (gzip-compressed or not) into the
// directory ?path=, creating it. Entries cannot leave that directory:
// extraction goes through an [os.Root].
func (s *Server) handlePutTar(w http.ResponseWriter, r *http.Request) {
	wroot, rel, dir, err := s.queryPath(r)
	if err != nil {
		envd.WriteError(w, err)
		return
	}
	defer wroot.Close()
	if err := wroot.MkdirAll(rel, 0o755); err != nil {
		envd.WriteError(w, fileError(dir, err))
		return
	}
	root, err := wroot.OpenRoot(rel)
	if err != nil {
		envd.WriteError(w, fileError(dir, err))
		return
	}
	defer root.Close()
	in, err := maybeGunzip(r.Body)
	if err != nil {
		envd.WriteError(w, envd.Errorf(envd.ErrBadRequest, "read gzip header: %v", err))
		return
	}
	files, size, err := extract(root, tar.NewReader(in))
	if err != nil {
		envd.WriteError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"path": dir, "files": files, "bytes": size})
}

// maybeGunzip returns r decompressed when it starts with the gzip magic.
func maybeGunzip(r io.Reader) (io.Reader, error) {
	br := bufio.NewReader(r)
	magic, _ := br.Peek(2)
	if len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		return gzip.NewReader(br)
	}
	return br, nil
}

// extract writes the entries of tr under root and counts regular files
// and their bytes.
func extract(root *os.Root, tr *tar.Reader) (files int, size int64, err error) {
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, size, nil
		}
		if err != nil {
			return files, size, envd.Errorf(envd.ErrBadRequest, "read tar: %v", err)
		}
		name := filepath.Clean(filepath.FromSlash(h.Name))
		if name == "." {
			continue
		}
		if filepath.IsAbs(name) || !filepath.IsLocal(name) {
			return files, size, envd.Errorf(envd.ErrBadRequest, "tar entry %q leaves the target directory", h.Name)
		}
		if err := extractOne(root, name, h, tr); err != nil {
			return files, size, envd.Errorf(envd.ErrBadRequest, "extract %q: %v", h.Name, err)
		}
		if h.Typeflag == tar.TypeReg {
			files++
			size += h.Size
		}
	}
}

func extractOne(root *os.Root, name string, h *tar.Header, r io.Reader) error {
	mode := os.FileMode(h.Mode).Perm()
	if dir := filepath.Dir(name); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	switch h.Typeflag {
	case tar.TypeDir:
		return root.MkdirAll(name, mode|0o700)
	case tar.TypeReg:
		f, err := root.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, r)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = root.Chmod(name, mode)
		}
		return err
	case tar.TypeSymlink:
		_ = root.Remove(name)
		return root.Symlink(h.Linkname, name)
	}
	return nil // other types (devices, fifos, hard links) are skipped
}

// handleGetTar streams the directory ?path= as a tar archive, gzipped
// when ?gzip=1. Names are relative to that directory.
func (s *Server) handleGetTar(w http.ResponseWriter, r *http.Request) {
	wroot, rel, dir, err := s.queryPath(r)
	if err != nil {
		envd.WriteError(w, err)
		return
	}
	defer wroot.Close()
	root, err := wroot.OpenRoot(rel)
	if err == nil {
		defer root.Close()
	} else if st, serr := wroot.Stat(rel); serr == nil && !st.IsDir() {
		err = envd.Errorf(envd.ErrBadRequest, "%s is not a directory; read it with GET .../files?path=", dir)
	} else {
		err = fileError(dir, err)
	}
	if err != nil {
		envd.WriteError(w, err)
		return
	}
	var out io.Writer = w
	w.Header().Set("Content-Type", "application/x-tar")
	if r.URL.Query().Get("gzip") == "1" {
		w.Header().Set("Content-Type", "application/gzip")
		gz := gzip.NewWriter(w)
		defer gz.Close()
		out = gz
	}
	w.WriteHeader(http.StatusOK)
	tw := tar.NewWriter(out)
	if err := addDir(tw, root); err != nil {
		// Headers are sent: abort so the client sees a broken stream
		// instead of a short archive that looks complete.
		s.opts.Logger.Warn("tar directory", "path", dir, "err", err)
		panic(http.ErrAbortHandler)
	}
	_ = tw.Close()
}

// addDir writes the tree under root to tw: directories, regular files
// and symlinks (not followed), with names relative to root.
func addDir(tw *tar.Writer, root *os.Root) error {
	return fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if info.Mode()&fs.ModeSymlink != 0 {
			if link, err = root.Readlink(p); err != nil {
				return err
			}
		} else if !info.Mode().IsRegular() && !info.IsDir() {
			return nil // sockets, fifos and devices are skipped
		}
		h, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		h.Name = p
		if info.IsDir() {
			h.Name += "/"
		}
		h.Uname, h.Gname = "", ""
		if err := tw.WriteHeader(h); err != nil || !info.Mode().IsRegular() {
			return err
		}
		f, err := root.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.CopyN(tw, f, h.Size)
		return err
	})
}
