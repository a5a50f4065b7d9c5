package main

import (
	"context"
	"io"

	"github.com/spf13/pflag"

	"github.com/orchard-rl/orchard/reconstruct"
	"github.com/orchard-rl/orchard/rl/value"
)

// valueFlags are the flags of `orchard export --format value`.
type valueFlags struct {
	maxObservation int
}

func (v *valueFlags) register(fl *pflag.FlagSet) {
	fl.IntVar(&v.maxObservation, "value-max-observation", 0, "format value: cut tool and user messages longer than this many bytes to head and tail (0: keep whole)")
}

// exportSamples runs the export of opts.Format: value pairs, or one of
// reconstruct's sample formats.
func (v *valueFlags) exportSamples(ctx context.Context, src reconstruct.Source, w io.Writer, opts reconstruct.Options) (reconstruct.Stats, error) {
	if opts.Format == value.Format {
		return value.Export(ctx, src, w, opts, value.Options{MaxObservation: v.maxObservation})
	}
	return reconstruct.Export(ctx, src, w, opts)
}
