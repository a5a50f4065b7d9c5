package image

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// buildOrchard builds the static orchard binary as `make image` does.
func buildOrchard(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "orchard")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w -buildid=", "-o", bin, "../../cmd/orchard")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build orchard: %v\n%s", err, out)
	}
	return bin
}

// TestImage builds the image twice into t.TempDir(), reads the OCI layout
// and the docker tarball back, checks config, user, entrypoint and
// layers, runs the binary extracted from the image with --help, and
// finds the same digest both times.
func TestImage(t *testing.T) {
	bin := buildOrchard(t)
	opts := Options{Binary: bin, Version: "v1.2.3", Commit: "0123456789abcdef", Created: time.Unix(1700000000, 0)}
	var digests []v1.Hash
	var dir string
	for range 2 {
		img, err := Build(opts)
		if err != nil {
			t.Fatal(err)
		}
		dir = t.TempDir()
		d, err := Write(img, dir, "ghcr.io/orchard-rl/orchard:v1.2.3")
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, d)
	}
	if digests[0] != digests[1] {
		t.Fatalf("two builds: digests %s and %s, want equal", digests[0], digests[1])
	}

	fromLayout := layoutImage(t, filepath.Join(dir, LayoutDir))
	if d, _ := fromLayout.Digest(); d != digests[0] {
		t.Errorf("OCI layout digest = %s, want %s", d, digests[0])
	}
	fromTar, err := tarball.ImageFromPath(filepath.Join(dir, Tarball), nil)
	if err != nil {
		t.Fatalf("read docker tarball: %v", err)
	}
	for name, img := range map[string]v1.Image{"layout": fromLayout, "tarball": fromTar} {
		checkConfig(t, name, img)
	}
	files := layerFiles(t, fromLayout)
	for _, want := range []string{"etc/passwd", "etc/group", "etc/ssl/certs/ca-certificates.crt", "usr/local/bin/orchard", "tmp/"} {
		if _, ok := files[want]; !ok {
			t.Errorf("image has no %s (has %v)", want, slices.Sorted(func(y func(string) bool) {
				for k := range files {
					if !y(k) {
						return
					}
				}
			}))
		}
	}
	if !strings.Contains(string(files["etc/passwd"]), "nonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd = %q, want user 65532", files["etc/passwd"])
	}
	runExtracted(t, files["usr/local/bin/orchard"])
}

func layoutImage(t *testing.T, dir string) v1.Image {
	t.Helper()
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("read OCI layout: %v", err)
	}
	m, err := idx.IndexManifest()
	if err != nil || len(m.Manifests) != 1 {
		t.Fatalf("OCI layout index: %v, %d manifests, want 1", err, len(m.Manifests))
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func checkConfig(t *testing.T, name string, img v1.Image) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatalf("%s: config: %v", name, err)
	}
	c := cf.Config
	if c.User != "65532:65532" || !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/orchard"}) {
		t.Errorf("%s: user %q entrypoint %q, want 65532:65532 and /usr/local/bin/orchard", name, c.User, c.Entrypoint)
	}
	if c.Labels["org.opencontainers.image.version"] != "v1.2.3" || c.Labels["org.opencontainers.image.revision"] != "0123456789abcdef" {
		t.Errorf("%s: labels %v, want version v1.2.3 and revision 0123456789abcdef", name, c.Labels)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH || !cf.Created.Equal(time.Unix(1700000000, 0)) {
		t.Errorf("%s: platform %s/%s created %s", name, cf.OS, cf.Architecture, cf.Created)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 2 || len(cf.RootFS.DiffIDs) != 2 {
		t.Errorf("%s: %d layers, %d diff ids (%v), want 2", name, len(layers), len(cf.RootFS.DiffIDs), err)
	}
}

// layerFiles returns every file of the image's layers, directories with
// a trailing slash and nil content, after checking each header's time and
// owner.
func layerFiles(t *testing.T, img v1.Image) map[string][]byte {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if !h.ModTime.Equal(time.Unix(1700000000, 0)) || h.Uid != 0 || h.Uname != "" {
				t.Errorf("%s: mtime %s uid %d uname %q, want the fixed time and root without names", h.Name, h.ModTime, h.Uid, h.Uname)
			}
			var b bytes.Buffer
			io.Copy(&b, tr)
			files[h.Name] = b.Bytes()
			if h.Typeflag == tar.TypeDir {
				files[h.Name] = nil
			}
		}
		rc.Close()
	}
	return files
}

func runExtracted(t *testing.T, bin []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "orchard")
	if err := os.WriteFile(path, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(path, "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "sandbox-agent") || !strings.Contains(string(out), "proxy") {
		t.Fatalf("orchard --help from the image: %v\n%s", err, out)
	}
}

func TestBuildErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"no binary", Options{}, "no orchard binary"},
		{"missing binary", Options{Binary: filepath.Join(t.TempDir(), "none")}, "orchard binary"},
		{"missing certs", Options{Binary: "image_test.go", Certs: filepath.Join(t.TempDir(), "none")}, "CA certificates"},
	} {
		if _, err := Build(tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Build = %v, want an error about %q", tc.name, err, tc.want)
		}
	}
}
