package reconstruct

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"runtime"
	"slices"

	"golang.org/x/sync/errgroup"

	"github.com/orchard-rl/orchard/recorder"
)

// Source is what export reads from a store: [recorder.Store] satisfies it
// on either backend. Implementations must be safe for concurrent use.
type Source interface {
	ListEpisodes(ctx context.Context, f recorder.Filter) ([]recorder.EpisodeSummary, string, error)
	Episode(ctx context.Context, id string) (*recorder.EpisodeSummary, error)
	Calls(ctx context.Context, episodeID string) ([]*recorder.Call, error)
}

// Options configures [Export].
type Options struct {
	// Format is one of [Formats]; "" means trajectories.
	Format string
	// Filter selects episodes by task, group, status and time; ignored
	// when Episodes is set. Limit and Cursor are managed by Export.
	Filter recorder.Filter
	// Episodes, when set, are exported in this order instead of a listing.
	Episodes []string
	// Workers is how many episodes are reconstructed at once; 0 means
	// GOMAXPROCS. Output order does not depend on it.
	Workers int
	// OnDrift is the drift action ([DriftSplit], [DriftDrop], [DriftKeep]);
	// "" means split.
	OnDrift string
	// Check verifies every trajectory with token ids (see Stats.Violations).
	Check bool
	// Progress, when set, is called after each episode is written, from
	// the goroutine that called Export.
	Progress func(Progress)
	// Annotator, when set, fills the reward fields of every sample before
	// it is checked and formatted.
	Annotator Annotator

	// Encoding is [EncodingJSONL] ("" too) or [EncodingParquet] (trainer
	// formats only). Export finishes a parquet file (its footer) before
	// it returns; closing w is the caller's.
	Encoding string
	// ToolsAs is [ToolsAsStrings] ("" too) or [ToolsAsObjects] (JSONL
	// only): how trainer rows hold tools and tool-call arguments.
	ToolsAs string
	// RequireTokens drops the samples without token ids, counted in
	// Stats.Dropped under [DropNoTokenIDs].
	RequireTokens bool
	// NoTokens, when set, receives the samples without token ids in the
	// same encoding; the writer given to Export gets the others.
	NoTokens io.Writer
}

// Annotator fills the reward fields ([TurnReward], Trajectory.Reward,
// TokenTrajectory.Advantages, RewardConfig) of samples as they are
// exported. Export calls it from several goroutines at once, each sample
// once; an error stops the export.
type Annotator interface {
	AnnotateTrajectory(t *Trajectory) error
	AnnotateTurn(t *Turn) error
}

// Progress is the running count of an export.
type Progress struct {
	Episodes, TotalEpisodes int
	Calls                   int
	Bytes                   int64
}

// Stats reports what an export read and wrote.
type Stats struct {
	Episodes int
	Calls    int
	Samples  int // samples written (lines or rows)
	// WithIDs and WithoutIDs split Samples by whether the sample carries
	// token ids (a turn: its call's ids).
	WithIDs, WithoutIDs int
	// Dropped counts segments (or, for --require-tokens, samples) the
	// format wrote nothing for, by reason ([DropNoTokenIDs], ...).
	Dropped map[string]int
	Bytes   int64 // request and response bytes of the calls read
	// Unusable counts calls no sample trains on, by reason.
	Unusable map[string]int
	// Drift counts token breaks by drift class.
	Drift           map[string]int
	DroppedSegments int
	// BadSegments counts segments whose last request did not decode as its
	// API (no sample is written for them).
	BadSegments int
	// Checked counts trajectories with token ids verified by Check;
	// Violations counts failures by class (drift classes for segments kept
	// despite a drift, ViolationInputIDs, ViolationMask).
	Checked    int
	Violations map[string]int
	// threadOps is the work threading did, for tests of its growth.
	threadOps int
}

func newStats() Stats {
	return Stats{Unusable: map[string]int{}, Drift: map[string]int{}, Violations: map[string]int{}, Dropped: map[string]int{}}
}

func (s *Stats) add(o *Stats) {
	s.Episodes += o.Episodes
	s.Calls += o.Calls
	s.Samples += o.Samples
	s.WithIDs += o.WithIDs
	s.WithoutIDs += o.WithoutIDs
	s.Bytes += o.Bytes
	s.DroppedSegments += o.DroppedSegments
	s.BadSegments += o.BadSegments
	s.Checked += o.Checked
	s.threadOps += o.threadOps
	for _, p := range [][2]map[string]int{{s.Unusable, o.Unusable}, {s.Drift, o.Drift}, {s.Violations, o.Violations}, {s.Dropped, o.Dropped}} {
		for k, v := range p[1] {
			p[0][k] += v
		}
	}
}

// ViolationCount returns the total number of violations.
func (s *Stats) ViolationCount() int {
	n := 0
	for _, v := range s.Violations {
		n += v
	}
	return n
}

// ErrBadOptions is returned for options Export cannot run with.
var ErrBadOptions = errors.New("bad export options")

// defaults fills the zero fields of o.
func (o *Options) defaults() {
	if o.Format == "" {
		o.Format = FormatTrajectories
	}
	if o.OnDrift == "" {
		o.OnDrift = DriftSplit
	}
	if o.Encoding == "" {
		o.Encoding = EncodingJSONL
	}
	if o.ToolsAs == "" {
		o.ToolsAs = ToolsAsStrings
	}
	if o.Workers == 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
}

// validate reports the first option Export cannot run with.
func (o *Options) validate() error {
	if !slices.Contains(Formats, o.Format) {
		return fmt.Errorf("%w: unknown format %q (want one of %v)", ErrBadOptions, o.Format, Formats)
	}
	if !ValidDriftAction(o.OnDrift) {
		return fmt.Errorf("%w: unknown drift action %q (want split, drop or keep)", ErrBadOptions, o.OnDrift)
	}
	if o.Encoding != EncodingJSONL && o.Encoding != EncodingParquet {
		return fmt.Errorf("%w: unknown encoding %q (want jsonl or parquet)", ErrBadOptions, o.Encoding)
	}
	if o.Encoding == EncodingParquet && !slices.Contains(TrainerFormats, o.Format) {
		return fmt.Errorf("%w: format %s is JSONL only; parquet is for %v", ErrBadOptions, o.Format, TrainerFormats)
	}
	if o.ToolsAs != ToolsAsStrings && o.ToolsAs != ToolsAsObjects {
		return fmt.Errorf("%w: unknown tools encoding %q (want strings or objects)", ErrBadOptions, o.ToolsAs)
	}
	if o.ToolsAs == ToolsAsObjects && o.Encoding == EncodingParquet {
		// a parquet column has one schema: differing tool shapes would be
		// merged into one, each row gaining the others' members as nulls
		return fmt.Errorf("%w: tools as objects is JSONL only (a parquet column merges the tool shapes of all rows)", ErrBadOptions)
	}
	if o.Workers < 0 {
		return fmt.Errorf("%w: workers %d < 0", ErrBadOptions, o.Workers)
	}
	return nil
}

// Export reconstructs the selected episodes and writes their samples to w
// as JSON lines or parquet rows (Options.Encoding), in listing order
// whatever the number of workers. It returns when every episode is
// written, an error occurs, or ctx is done.
func Export(ctx context.Context, src Source, w io.Writer, opts Options) (Stats, error) {
	st := newStats()
	opts.defaults()
	if err := opts.validate(); err != nil {
		return st, err
	}
	eps, err := selectEpisodes(ctx, src, &opts)
	if err != nil {
		return st, err
	}
	type result struct {
		i    int
		rows []outRow
		st   Stats
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	g, ctx := errgroup.WithContext(ctx)
	jobs := make(chan int)
	results := make(chan result, opts.Workers)
	window := make(chan struct{}, 2*opts.Workers) // bounds episodes read but not yet written
	g.Go(func() error {
		defer close(jobs)
		for i := range eps {
			select {
			case window <- struct{}{}:
			case <-ctx.Done():
				return ctx.Err()
			}
			select {
			case jobs <- i:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	workers, wctx := errgroup.WithContext(ctx)
	for range opts.Workers {
		workers.Go(func() error {
			for i := range jobs {
				rows, est, err := exportEpisode(wctx, src, eps[i], int64(i), &opts)
				if err != nil {
					return err
				}
				select {
				case results <- result{i, rows, est}:
				case <-wctx.Done():
					return wctx.Err()
				}
			}
			return nil
		})
	}
	g.Go(func() error { defer close(results); return workers.Wait() })

	main, split := newSink(&opts, w, true), rowSink(nil)
	if opts.NoTokens != nil {
		split = newSink(&opts, opts.NoTokens, false)
	}
	pending := map[int]result{}
	next := 0
	var werr error
	for r := range results {
		if werr != nil {
			continue // draining after a write error
		}
		pending[r.i] = r
		for p, ok := pending[next]; ok; p, ok = pending[next] {
			delete(pending, next)
			next++
			<-window
			if werr = writeRows(p.rows, main, split); werr != nil {
				cancel(werr)
				break
			}
			st.add(&p.st)
			if opts.Progress != nil {
				opts.Progress(Progress{Episodes: st.Episodes, TotalEpisodes: len(eps), Calls: st.Calls, Bytes: st.Bytes})
			}
		}
	}
	if err := g.Wait(); werr == nil && err != nil {
		return st, err
	}
	if werr != nil {
		return st, werr
	}
	if split != nil {
		if err := split.close(); err != nil {
			return st, err
		}
	}
	return st, main.close()
}

// writeRows writes an episode's rows, those without token ids to split
// when it is set.
func writeRows(rows []outRow, main, split rowSink) error {
	for i := range rows {
		dst := main
		if split != nil && !rows[i].ids {
			dst = split
		}
		if err := dst.write(&rows[i]); err != nil {
			return err
		}
	}
	return nil
}

// exportEpisode reconstructs one episode (the index-th exported) into
// its rows.
func exportEpisode(ctx context.Context, src Source, ep recorder.EpisodeSummary, index int64, opts *Options) ([]outRow, Stats, error) {
	st := newStats()
	calls, err := src.Calls(ctx, ep.ID)
	if err != nil {
		return nil, st, fmt.Errorf("read calls of episode %s: %w", ep.ID, err)
	}
	e := newEpisode(ep, calls, opts.OnDrift, &st)
	e.index = index
	rows, err := e.encode(opts, &st)
	if err != nil {
		return nil, st, err
	}
	st.Episodes = 1
	return rows, st, nil
}

// selectEpisodes returns the episodes to export, in output order.
func selectEpisodes(ctx context.Context, src Source, opts *Options) ([]recorder.EpisodeSummary, error) {
	if len(opts.Episodes) > 0 {
		out := make([]recorder.EpisodeSummary, 0, len(opts.Episodes))
		for _, id := range opts.Episodes {
			ep, err := src.Episode(ctx, id)
			if err != nil {
				return nil, err // the store's error names the episode
			}
			out = append(out, *ep)
		}
		return out, nil
	}
	f := opts.Filter
	f.Cursor = ""
	var out []recorder.EpisodeSummary
	for {
		page, cursor, err := src.ListEpisodes(ctx, f)
		if err != nil {
			return nil, fmt.Errorf("list episodes: %w", err)
		}
		out = append(out, page...)
		if f.Limit > 0 && len(out) >= f.Limit {
			return out[:f.Limit], nil
		}
		if cursor == "" {
			break
		}
		f.Cursor = cursor
	}
	return out, nil
}

// SortedKeys returns a count map's keys in order, for stable reports.
func SortedKeys(m map[string]int) []string {
	return slices.Sorted(maps.Keys(m))
}
