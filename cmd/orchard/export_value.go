package main

import (
	"context"
	"io"

	"github.com/spf13/pflag"

	"github.com/orchard-rl/orchard/reconstruct"
	"github.com/orchard-rl/orchard/rl/value"
)

// valueMaxObservation is --value-max-observation of `orchard export`.
var valueMaxObservation int

func registerValueFlags(fl *pflag.FlagSet) {
	fl.IntVar(&valueMaxObservation, "value-max-observation", 0, "format value: cut tool and user messages longer than this many bytes to head and tail (0: keep whole)")
}

// exportSamples runs the export of opts.Format: value pairs, or one of
// reconstruct's sample formats.
func exportSamples(ctx context.Context, src reconstruct.Source, w io.Writer, opts reconstruct.Options) (reconstruct.Stats, error) {
	if opts.Format == value.Format {
		return value.Export(ctx, src, w, opts, value.Options{MaxObservation: valueMaxObservation})
	}
	return reconstruct.Export(ctx, src, w, opts)
}
