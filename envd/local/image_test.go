package local

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/orchard-rl/orchard/envd"
)

// osRelease is the image's /etc/os-release, unlike any host's.
const osRelease = "ID=orchard-test\n"

// testImage builds a two-layer image from host files: a shell, a few
// tools and the libraries they and the agent (this test binary) load,
// /etc/os-release, a hard link, and a file the second layer deletes with
// a whiteout.
func testImage(t *testing.T) v1.Image {
	t.Helper()
	var l1 bytes.Buffer
	tw := tar.NewWriter(&l1)
	seen := map[string]bool{}
	for _, top := range []string{"bin", "sbin", "lib", "lib64"} {
		if target, err := os.Readlink("/" + top); err == nil {
			writeTar(t, tw, &tar.Header{Name: top, Typeflag: tar.TypeSymlink, Linkname: target})
		}
	}
	for _, bin := range []string{"sh", "cat", "stat", "id", "ls"} {
		p, err := exec.LookPath(bin)
		if err != nil {
			t.Skipf("%s not found: %v", bin, err)
		}
		addHostFile(t, tw, p, seen)
		for _, lib := range sharedLibs(t, p) {
			addHostFile(t, tw, lib, seen)
		}
	}
	for _, lib := range sharedLibs(t, os.Args[0]) {
		addHostFile(t, tw, lib, seen)
	}
	writeTar(t, tw, &tar.Header{Name: "etc/", Typeflag: tar.TypeDir, Mode: 0o755})
	writeFileTar(t, tw, "etc/os-release", osRelease)
	writeFileTar(t, tw, "data/a", "shared\n")
	writeTar(t, tw, &tar.Header{Name: "data/b", Typeflag: tar.TypeLink, Linkname: "data/a"})
	writeFileTar(t, tw, "secret", "deleted by the next layer\n")
	_ = tw.Close()
	var l2 bytes.Buffer
	tw = tar.NewWriter(&l2)
	writeFileTar(t, tw, ".wh.secret", "")
	writeFileTar(t, tw, "data/c", "layer two\n")
	_ = tw.Close()
	img, err := mutate.AppendLayers(empty.Image, layerOf(t, l1.Bytes()), layerOf(t, l2.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func layerOf(t *testing.T, b []byte) v1.Layer {
	t.Helper()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

var libRE = regexp.MustCompile(`(/\S+) \(0x`)

// sharedLibs lists the libraries ldd says p loads.
func sharedLibs(t *testing.T, p string) []string {
	t.Helper()
	out, _ := exec.Command("ldd", p).Output() // static binaries make ldd fail
	var libs []string
	for _, m := range libRE.FindAllStringSubmatch(string(out), -1) {
		libs = append(libs, m[1])
	}
	return libs
}

// addHostFile adds p's content at its resolved path and, when p is a
// symlink (or under one), p as a symlink to it.
func addHostFile(t *testing.T, tw *tar.Writer, p string, seen map[string]bool) {
	t.Helper()
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	if !seen[real] {
		seen[real] = true
		b, err := os.ReadFile(real)
		if err != nil {
			t.Fatal(err)
		}
		writeTar(t, tw, &tar.Header{Name: strings.TrimPrefix(real, "/"), Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(b))}, b...)
	}
	if dir, _ := filepath.EvalSymlinks(filepath.Dir(p)); dir+"/"+filepath.Base(p) != real && !seen[p] {
		seen[p] = true
		writeTar(t, tw, &tar.Header{Name: strings.TrimPrefix(dir+"/"+filepath.Base(p), "/"), Typeflag: tar.TypeSymlink, Linkname: real})
	}
}

func writeFileTar(t *testing.T, tw *tar.Writer, name, content string) {
	writeTar(t, tw, &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(content))}, []byte(content)...)
}

func writeTar(t *testing.T, tw *tar.Writer, h *tar.Header, body ...byte) {
	t.Helper()
	if err := tw.WriteHeader(h); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(body); err != nil {
		t.Fatal(err)
	}
}

// TestImageRoots: an OCI layout directory and a docker save tarball,
// built here from files, run as jail roots: exec sees the image's
// /etc/os-release, whiteouts and hard links are applied, the agent runs,
// two concurrent creates unpack the image once, and a blob that does not
// match its digest is refused.
func TestImageRoots(t *testing.T) {
	t.Parallel()
	img := testImage(t)
	dir := t.TempDir()
	ociDir, dockerTar := filepath.Join(dir, "oci"), filepath.Join(dir, "image.tar")
	lp, err := layout.Write(ociDir, empty.Index)
	if err == nil {
		err = lp.AppendImage(img)
	}
	if err == nil {
		err = tarball.WriteToFile(dockerTar, name.MustParseReference("orchard-test:1"), img)
	}
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envd.Options{})
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() {
			sb, err := e.c.Create(t.Context(), envd.Spec{Image: ociDir})
			if err == nil {
				t.Cleanup(func() { _ = sb.Close() })
				checkImageRoot(t, sb.Exec)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("create from OCI layout: %v", err)
		}
	}
	if n := e.b.images.unpacks.Load(); n != 1 {
		t.Errorf("two concurrent creates of one image unpacked it %d times, want 1", n)
	}
	sb := e.create(t, envd.Spec{Image: dockerTar})
	checkImageRoot(t, sb.Exec)
	if n := e.b.images.unpacks.Load(); n != 1 {
		t.Errorf("the docker tarball of the same image unpacked again (%d unpacks): the cache is keyed by digest", n)
	}
	checkCorruptBlob(t, e, ociDir)
}

func checkImageRoot(t *testing.T, exec func(ctx context.Context, req envd.ExecRequest) (*envd.ExecResult, error)) {
	res, err := exec(context.Background(), envd.ExecRequest{Shell: "cat /etc/os-release; ls /data; stat -c %h /data/a; test -e /secret || echo whited-out; id -u"})
	want := osRelease + "a\nb\nc\n2\nwhited-out\n65534\n"
	if err != nil || res.Stdout != want {
		t.Errorf("exec in image root = %+v, %v; want stdout %q", res, err, want)
	}
}

// checkCorruptBlob rewrites one layer blob of a copy of the layout with
// other bytes; create must refuse it.
func checkCorruptBlob(t *testing.T, e *env, ociDir string) {
	bad := filepath.Join(t.TempDir(), "oci")
	if out, err := exec.Command("cp", "-a", ociDir, bad).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	img, _ := layoutImage(bad)
	layers, _ := img.Layers()
	h, _ := layers[len(layers)-1].Digest()
	blob := filepath.Join(bad, "blobs", h.Algorithm, h.Hex)
	b, _ := os.ReadFile(blob)
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(blob, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// The manifest is unchanged, so the digest, and the cache key, would
	// be the image's: clear the cache to make this one unpack.
	e.b.images = newImageCache(filepath.Join(stateDir(t), "images"))
	if _, err := e.c.Create(t.Context(), envd.Spec{Image: bad}); !isStatus(err, 400) || !strings.Contains(err.Error(), "does not match its digests") {
		t.Errorf("create from a layout with a corrupt blob = %v, want 400 naming the digest check", err)
	}
}
