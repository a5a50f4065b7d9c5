package agent

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"

	"github.com/orchard-rl/orchard/envd"
)

// queryPath returns the ?path= of r resolved against the work directory.
func (s *Server) queryPath(r *http.Request) (string, error) {
	p := r.URL.Query().Get("path")
	if p == "" {
		return "", envd.Errorf(envd.ErrBadRequest, "missing ?path= (absolute, or relative to the work directory)")
	}
	return s.path(p), nil
}

// fileError maps a filesystem error to an envd error for path p.
func fileError(p string, err error) error {
	switch {
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
	p, err := s.queryPath(r)
	if err != nil {
		envd.WriteError(w, err)
		return
	}
	mode := os.FileMode(0o644)
	if m := r.URL.Query().Get("mode"); m != "" {
		v, err := strconv.ParseUint(m, 8, 32)
		if err != nil || v > 0o7777 {
			envd.WriteError(w, envd.Errorf(envd.ErrBadRequest, "mode=%q: want octal permission bits like 0755", m))
			return
		}
		mode = os.FileMode(v)
	}
	n, err := writeFileAtomic(p, r.Body, mode)
	if err != nil {
		envd.WriteError(w, fileError(p, err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"path": p, "size": n})
}

func writeFileAtomic(p string, body io.Reader, mode os.FileMode) (int64, error) {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return 0, err
	}
	f, err := os.CreateTemp(filepath.Dir(p), ".orchard-put-*")
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
		err = os.Rename(f.Name(), p)
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return 0, err
	}
	return n, nil
}

// handleGetFile sends the file at ?path=.
func (s *Server) handleGetFile(w http.ResponseWriter, r *http.Request) {
	p, err := s.queryPath(r)
	if err != nil {
		envd.WriteError(w, err)
		return
	}
	f, err := os.Open(p)
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
	dir, err := s.queryPath(r)
	if err != nil {
		envd.WriteError(w, err)
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		envd.WriteError(w, fileError(dir, err))
		return
	}
	root, err := os.OpenRoot(dir)
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
	dir, err := s.queryPath(r)
	if err != nil {
		envd.WriteError(w, err)
		return
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		if err == nil {
			err = envd.Errorf(envd.ErrBadRequest, "%s is not a directory; read it with GET .../files?path=", dir)
		} else {
			err = fileError(dir, err)
		}
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
	if err := addDir(tw, dir); err != nil {
		// Headers are sent: abort so the client sees a broken stream
		// instead of a short archive that looks complete.
		s.opts.Logger.Warn("tar directory", "path", dir, "err", err)
		panic(http.ErrAbortHandler)
	}
	_ = tw.Close()
}

// addDir writes the tree under dir to tw: directories, regular files and
// symlinks (not followed), with names relative to dir.
func addDir(tw *tar.Writer, dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if info.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		} else if !info.Mode().IsRegular() && !info.IsDir() {
			return nil // sockets, fifos and devices are skipped
		}
		h, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if info.IsDir() {
			h.Name += "/"
		}
		h.Uname, h.Gname = "", ""
		if err := tw.WriteHeader(h); err != nil || !info.Mode().IsRegular() {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.CopyN(tw, f, h.Size)
		return err
	})
}
