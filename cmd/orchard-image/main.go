// Command orchard-image builds orchard's container image (deploy/image)
// from a static orchard binary, without Docker: `make image` runs it.
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/orchard-rl/orchard/deploy/image"
	"github.com/orchard-rl/orchard/internal/cliconf"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "orchard-image:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := pflag.NewFlagSet("orchard-image", pflag.ContinueOnError)
	var opts image.Options
	out := fs.String("out-dir", "bin", "output folder (OCI layout "+image.LayoutDir+"/ and "+image.Tarball+")")
	cliconf.Alias(fs, "out", "out-dir") // --out names a file in every orchard command
	ref := fs.String("ref", "ghcr.io/orchard-rl/orchard:latest", "image name the tarball is tagged with")
	fs.StringVar(&opts.Binary, "binary", "", "static orchard binary (CGO_ENABLED=0, linux)")
	fs.StringVar(&opts.Certs, "certs", "", "CA bundle (default: the build host's /etc/ssl/certs/ca-certificates.crt)")
	fs.StringVar(&opts.Arch, "arch", "", "GOARCH of the binary (default: this machine's)")
	fs.StringVar(&opts.Version, "version", "dev", "org.opencontainers.image.version label")
	fs.StringVar(&opts.Commit, "commit", "", "org.opencontainers.image.revision label")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH %q: want seconds since 1970", s)
		}
		opts.Created = time.Unix(sec, 0)
	}
	img, err := image.Build(opts)
	if err != nil {
		return err
	}
	d, err := image.Write(img, *out, *ref)
	if err != nil {
		return err
	}
	fmt.Printf("%s %s/%s %s/%s\n", d, *out, image.LayoutDir, *out, image.Tarball)
	return nil
}
