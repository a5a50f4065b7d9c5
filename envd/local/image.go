package local

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	"golang.org/x/sync/singleflight"

	"github.com/orchard-rl/orchard/envd"
)

// imageCache unpacks task images (an OCI image layout directory or a
// `docker save` tarball) once each into dir/sha256-HEX/rootfs, keyed by
// the image's manifest digest, and hands out those roots. It is safe for
// concurrent use: concurrent creates of one image unpack it once.
type imageCache struct {
	dir     string
	group   singleflight.Group
	unpacks atomic.Int64 // images unpacked by this cache, for tests

	mu      sync.Mutex // guards following
	digests map[string]v1.Hash
}

func newImageCache(dir string) *imageCache {
	return &imageCache{dir: dir, digests: map[string]v1.Hash{}}
}

// root returns the root filesystem directory for image: "" for the
// minimal host root, a plain directory as it is, else the unpacked image.
func (c *imageCache) root(_ context.Context, image string) (string, error) {
	if image == "" {
		return "", nil
	}
	st, err := os.Stat(image)
	if err != nil || !filepath.IsAbs(image) {
		return "", envd.Errorf(envd.ErrBadRequest, "image %q: the local backend wants an absolute path to an OCI image layout, a docker save tarball or a root filesystem directory", image)
	}
	if st.IsDir() {
		if _, err := os.Stat(filepath.Join(image, "oci-layout")); err != nil {
			return image, nil
		}
	}
	img, key, err := c.open(image, st)
	if err != nil {
		return "", envd.Errorf(envd.ErrBadRequest, "image %s: %v", image, err)
	}
	dst, err, _ := c.group.Do(key.String(), func() (any, error) { return c.unpack(img, key) })
	if err != nil {
		return "", err
	}
	return dst.(string), nil
}

// open reads the image at p and its manifest digest (memoized by path,
// size and modification time: a docker tarball's digest costs a pass over
// its layers).
func (c *imageCache) open(p string, st os.FileInfo) (v1.Image, v1.Hash, error) {
	var img v1.Image
	var err error
	if st.IsDir() {
		img, err = layoutImage(p)
	} else {
		img, err = tarball.ImageFromPath(p, nil)
	}
	if err != nil {
		return nil, v1.Hash{}, err
	}
	memo := fmt.Sprintf("%s\x00%d\x00%d", p, st.Size(), st.ModTime().UnixNano())
	c.mu.Lock()
	h, ok := c.digests[memo]
	c.mu.Unlock()
	if ok {
		return img, h, nil
	}
	if h, err = img.Digest(); err != nil {
		return nil, v1.Hash{}, fmt.Errorf("image digest: %w", err)
	}
	c.mu.Lock()
	c.digests[memo] = h
	c.mu.Unlock()
	return img, h, nil
}

// layoutImage picks the image of an OCI layout: its only manifest, or
// the one for this machine's platform, descending into nested indexes.
func layoutImage(dir string) (v1.Image, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, err
	}
	return pickImage(idx)
}

func pickImage(idx v1.ImageIndex) (v1.Image, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		if len(m.Manifests) > 1 && d.Platform != nil && (d.Platform.OS != "linux" || d.Platform.Architecture != runtime.GOARCH) {
			continue
		}
		if d.MediaType.IsIndex() {
			child, err := idx.ImageIndex(d.Digest)
			if err != nil {
				return nil, err
			}
			return pickImage(child)
		}
		return idx.Image(d.Digest)
	}
	return nil, errors.New("no linux/" + runtime.GOARCH + " image in the index")
}

// unpack verifies img (every blob against its digest) and extracts its
// flattened filesystem (whiteouts applied) into the cache, once.
func (c *imageCache) unpack(img v1.Image, h v1.Hash) (string, error) {
	dst := filepath.Join(c.dir, h.Algorithm+"-"+h.Hex)
	rootfs := filepath.Join(dst, "rootfs")
	if _, err := os.Stat(rootfs); err == nil {
		return rootfs, nil
	}
	if err := validate.Image(img); err != nil {
		return "", envd.Errorf(envd.ErrBadRequest, "image %s: content does not match its digests: %v", h, err)
	}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return "", fmt.Errorf("image cache: %w", err)
	}
	tmp, err := os.MkdirTemp(c.dir, ".unpack-")
	if err != nil {
		return "", fmt.Errorf("image cache: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := extractImage(img, filepath.Join(tmp, "rootfs")); err != nil {
		return "", envd.Errorf(envd.ErrBadRequest, "unpack image %s: %v", h, err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", fmt.Errorf("image cache: %w", err)
	}
	if err := os.Rename(tmp, dst); err != nil && !errors.Is(err, os.ErrExist) {
		if _, serr := os.Stat(rootfs); serr != nil { // another envd did not win the race either
			return "", fmt.Errorf("image cache: %w", err)
		}
	}
	c.unpacks.Add(1)
	return rootfs, nil
}

// extractImage writes img's flattened filesystem under dir through an
// [os.Root], so no entry (nor a symlink among them) can leave it.
func extractImage(img v1.Image, dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	type dirMode struct {
		name string
		mode os.FileMode
		t    time.Time
	}
	var dirs []dirMode
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		name := filepath.Clean(strings.TrimPrefix(filepath.FromSlash(h.Name), "/"))
		if name == "." || !filepath.IsLocal(name) {
			continue
		}
		if err := writeEntry(root, name, h, tr); err != nil {
			return fmt.Errorf("%s: %w", h.Name, err)
		}
		if h.Typeflag == tar.TypeDir {
			dirs = append(dirs, dirMode{name, tarMode(h), h.ModTime})
		}
	}
	// Directory modes last: a read-only directory must still take its files.
	for _, d := range dirs {
		if err := root.Chmod(d.name, d.mode); err != nil {
			return err
		}
	}
	return nil
}

// tarMode keeps the permission and sticky bits; setuid and setgid are
// dropped (jails run with no_new_privs anyway).
func tarMode(h *tar.Header) os.FileMode {
	m := os.FileMode(h.Mode).Perm()
	if h.Mode&0o1000 != 0 {
		m |= os.ModeSticky
	}
	return m
}

// writeEntry creates one entry: directories, regular files, symlinks and
// hard links, with the owner the image gives; devices and fifos are
// skipped.
func writeEntry(root *os.Root, name string, h *tar.Header, r io.Reader) error {
	if dir := filepath.Dir(name); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	switch h.Typeflag {
	case tar.TypeDir:
		if err := root.MkdirAll(name, 0o755); err != nil {
			return err
		}
	case tar.TypeReg:
		_ = root.Remove(name)
		f, err := root.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, r)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = root.Chmod(name, tarMode(h))
		}
		if err != nil {
			return err
		}
	case tar.TypeSymlink:
		_ = root.Remove(name)
		return lchown(root, name, h, root.Symlink(h.Linkname, name))
	case tar.TypeLink:
		target := filepath.Clean(strings.TrimPrefix(filepath.FromSlash(h.Linkname), "/"))
		if !filepath.IsLocal(target) {
			return fmt.Errorf("hard link to %q leaves the image", h.Linkname)
		}
		_ = root.Remove(name)
		return root.Link(target, name)
	default:
		return nil
	}
	return lchown(root, name, h, nil)
}

// lchown gives name the image's owner when envd may (it runs as root).
func lchown(root *os.Root, name string, h *tar.Header, err error) error {
	if err != nil || os.Geteuid() != 0 {
		return err
	}
	return root.Lchown(name, h.Uid, h.Gid)
}
