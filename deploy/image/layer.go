package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// entry is one file or directory of a layer.
type entry struct {
	name string // without a leading slash
	mode int64  // with tar's type from dir
	dir  bool
	data []byte
}

// passwd and group know root and the non-root user the image runs as
// (65532, "nonroot", as distroless names it).
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group  = "root:x:0:\nnonroot:x:65532:\n"
)

func baseLayer(certs string, at time.Time) (v1.Layer, error) {
	if err := statFile(certs, "CA certificates"); err != nil {
		return nil, err
	}
	pem, err := os.ReadFile(certs)
	if err != nil {
		return nil, fmt.Errorf("read CA certificates: %w", err)
	}
	return layer([]entry{
		{name: "etc", mode: 0o755, dir: true},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/ssl", mode: 0o755, dir: true},
		{name: "etc/ssl/certs", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: pem},
		{name: "home", mode: 0o755, dir: true},
		{name: "home/nonroot", mode: 0o700, dir: true},
		{name: "tmp", mode: 0o1777, dir: true},
	}, at)
}

func binaryLayer(bin string, at time.Time) (v1.Layer, error) {
	if err := statFile(bin, "orchard binary"); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("read orchard binary: %w", err)
	}
	return layer([]entry{
		{name: "usr", mode: 0o755, dir: true},
		{name: "usr/local", mode: 0o755, dir: true},
		{name: "usr/local/bin", mode: 0o755, dir: true},
		{name: BinaryPath[1:], mode: 0o755, data: data},
	}, at)
}

// layer tars entries in order, every header with the same time, owner 0
// and no owner names, and gzips the tar at the default level, so equal
// inputs give equal bytes.
func layer(entries []entry, at time.Time) (v1.Layer, error) {
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, ModTime: at, Format: tar.FormatPAX, Typeflag: tar.TypeReg, Size: int64(len(e.data))}
		if e.dir {
			h.Name, h.Typeflag, h.Size = e.name+"/", tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("tar %s: %w", e.name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("tar %s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("tar: %w", err)
	}
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.DefaultCompression)
	if _, err := io.Copy(zw, &raw); err != nil {
		return nil, fmt.Errorf("gzip layer: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("gzip layer: %w", err)
	}
	b := gz.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithMediaType(types.OCILayer))
}
