package image

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Output names under the output folder.
const (
	LayoutDir = "orchard-oci"       // OCI image layout
	Tarball   = "orchard-image.tar" // docker load -i
)

// Write writes img under dir as an OCI layout (LayoutDir, replaced if
// present) and a docker-load tarball (Tarball) tagged ref. It returns the
// image's digest.
func Write(img v1.Image, dir, ref string) (v1.Hash, error) {
	tag, err := name.NewTag(ref)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("image reference %q: %w", ref, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return v1.Hash{}, fmt.Errorf("create %s: %w", dir, err)
	}
	lp := filepath.Join(dir, LayoutDir)
	if err := os.RemoveAll(lp); err != nil {
		return v1.Hash{}, fmt.Errorf("replace %s: %w", lp, err)
	}
	p, err := layout.Write(lp, empty.Index)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("write OCI layout: %w", err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tag.String()})); err != nil {
		return v1.Hash{}, fmt.Errorf("write OCI layout: %w", err)
	}
	if err := tarball.WriteToFile(filepath.Join(dir, Tarball), tag, img); err != nil {
		return v1.Hash{}, fmt.Errorf("write image tarball: %w", err)
	}
	d, err := img.Digest()
	if err != nil {
		return v1.Hash{}, fmt.Errorf("image digest: %w", err)
	}
	return d, nil
}
