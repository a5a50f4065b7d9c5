package image

import (
	"fmt"
	"os"
	"runtime"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Paths and identity inside the image.
const (
	BinaryPath = "/usr/local/bin/orchard"
	CertsPath  = "/etc/ssl/certs/ca-certificates.crt"
	UID        = 65532
	User       = "65532:65532"
)

// Options says what goes into the image.
type Options struct {
	// Binary is the path of a static (CGO_ENABLED=0) orchard binary for
	// linux/Arch. Required.
	Binary string
	// Certs is the CA bundle to ship; "" means the build host's
	// /etc/ssl/certs/ca-certificates.crt.
	Certs string
	// Arch is the GOARCH the binary was built for; "" means runtime.GOARCH.
	Arch string
	// Version and Commit become the org.opencontainers.image.version and
	// .revision labels.
	Version, Commit string
	// Created is the one timestamp of every file and of the config; zero
	// means the Unix epoch. Set it from SOURCE_DATE_EPOCH (or the commit
	// time) to keep builds of one commit identical.
	Created time.Time
}

// Build assembles the image in memory (layers are read from their files
// when written).
func Build(opts Options) (v1.Image, error) {
	opts.defaults()
	base, err := baseLayer(opts.Certs, opts.Created)
	if err != nil {
		return nil, err
	}
	bin, err := binaryLayer(opts.Binary, opts.Created)
	if err != nil {
		return nil, err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, History: history("base: /etc/passwd, /etc/group, CA certificates", opts.Created)},
		mutate.Addendum{Layer: bin, History: history("orchard binary", opts.Created)})
	if err != nil {
		return nil, fmt.Errorf("append layers: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS, cf.Created = opts.Arch, "linux", v1.Time{Time: opts.Created}
	cf.Config = config(opts)
	return mutate.ConfigFile(img, cf)
}

// defaults fills the zero fields of o and puts Created in UTC.
func (o *Options) defaults() {
	if o.Certs == "" {
		o.Certs = "/etc/ssl/certs/ca-certificates.crt"
	}
	if o.Arch == "" {
		o.Arch = runtime.GOARCH
	}
	if o.Created.IsZero() {
		o.Created = time.Unix(0, 0)
	}
	o.Created = o.Created.UTC()
}

func config(opts Options) v1.Config {
	return v1.Config{
		User:       User,
		Entrypoint: []string{BinaryPath},
		Cmd:        []string{"--help"},
		WorkingDir: "/",
		Env: []string{
			"PATH=/usr/local/bin:/usr/bin:/bin",
			"SSL_CERT_FILE=" + CertsPath,
		},
		Labels: map[string]string{
			"org.opencontainers.image.title":    "orchard",
			"org.opencontainers.image.source":   "https://github.com/orchard-rl/orchard",
			"org.opencontainers.image.version":  opts.Version,
			"org.opencontainers.image.revision": opts.Commit,
			"org.opencontainers.image.created":  opts.Created.Format(time.RFC3339),
		},
	}
}

func history(what string, at time.Time) v1.History {
	return v1.History{Created: v1.Time{Time: at}, CreatedBy: "orchard deploy/image: " + what}
}

// statFile fails clearly when a required input is missing.
func statFile(path, what string) error {
	if path == "" {
		return fmt.Errorf("no %s given", what)
	}
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
