package rewards

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/orchard-rl/orchard/reconstruct"
)

// FormatCASFT is the credit-assignment SFT format.
const FormatCASFT = "ca-sft"

// Export scores the episodes ex selects, then exports them with their
// rewards: in ex.Format, or as credit-assignment SFT samples when
// ex.Format is [FormatCASFT].
func Export(ctx context.Context, src reconstruct.Source, w io.Writer, ex reconstruct.Options, o Options) (reconstruct.Stats, *Scores, error) {
	s, err := Score(ctx, src, ex, o)
	if err != nil {
		return reconstruct.Stats{}, nil, err
	}
	ex.Annotator = s
	if ex.Format != FormatCASFT {
		st, err := reconstruct.Export(ctx, src, w, ex)
		return st, s, err
	}
	ex.Format = reconstruct.FormatTrajectories
	cw := &casftWriter{s: s, w: w}
	st, err := reconstruct.Export(ctx, src, cw, ex)
	if err == nil && cw.err != nil {
		err = cw.err
	}
	st.Samples = cw.samples
	return st, s, err
}

// casftWriter turns the trajectory lines export writes, in order, into
// ca-sft lines.
type casftWriter struct {
	s       *Scores
	w       io.Writer
	samples int
	err     error
}

func (c *casftWriter) Write(p []byte) (int, error) {
	sc := bufio.NewScanner(bytes.NewReader(p))
	sc.Buffer(nil, len(p)+1)
	enc := json.NewEncoder(c.w)
	enc.SetEscapeHTML(false)
	for sc.Scan() {
		var t reconstruct.Trajectory
		if err := json.Unmarshal(sc.Bytes(), &t); err != nil {
			c.err = fmt.Errorf("read trajectory: %w", err)
			return 0, c.err
		}
		smp, ok := c.s.CASFT(&t, DefaultCASFT)
		if !ok {
			continue
		}
		if err := enc.Encode(smp); err != nil {
			return 0, err
		}
		c.samples++
	}
	return len(p), nil
}
