package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/orchard-rl/orchard/reconstruct"
)

func init() { subcommands = append(subcommands, newExportCmd) }

// exportFlags are the flags of `orchard export`.
type exportFlags struct {
	store    storeFlags
	format   string
	out      string
	task     string
	group    string
	status   string
	since    string
	episodes []string
	workers  int
	check    bool
	onDrift  string
	shard    string
}

func newExportCmd() *cobra.Command {
	var f exportFlags
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Rebuild recorded episodes into training samples (JSONL)",
		Long: "Export reconstructs recorded episodes into turn-level or trajectory-level training samples,\n" +
			"one JSON object per line (docs/sample-format.md). --check verifies token trajectories and\n" +
			"exits 1 when a sample breaks them.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runExport(cmd, &f) },
	}
	addStoreFlags(cmd, &f.store)
	fl := cmd.Flags()
	fl.StringVar(&f.format, "format", reconstruct.FormatTrajectories, "output format: "+strings.Join(reconstruct.Formats, "|"))
	fl.StringVar(&f.out, "out", "", "output file (.jsonl or .jsonl.zst), or - for stdout (default stdout; discarded with --check)")
	fl.StringVar(&f.task, "task", "", "only episodes of this task id")
	fl.StringVar(&f.group, "group", "", "only episodes of this group id")
	fl.StringVar(&f.status, "status", "", "only episodes with this status (running|success|failure|error|timeout)")
	fl.StringVar(&f.since, "since", "", "only episodes created at or after this time (RFC 3339) or this long ago (Go duration, e.g. 24h)")
	fl.StringSliceVar(&f.episodes, "episodes", nil, "export exactly these episode ids, in this order (comma-separated)")
	fl.IntVar(&f.workers, "workers", 0, "episodes reconstructed in parallel (0: one per CPU); output order is the same for any value")
	fl.BoolVar(&f.check, "check", false, "verify every token trajectory and report violations per drift class")
	fl.StringVar(&f.onDrift, "on-drift", reconstruct.DriftSplit, "what to do when token ids break inside a segment: split|drop|keep")
	fl.StringVar(&f.shard, "shard", "", "export only shard I of N (I/N, 0-based; by episode id hash) and write FILE.shard.json beside --out for `export merge`")
	cmd.AddCommand(newExportMergeCmd())
	return cmd
}

// exportOptions validates the flags into export options.
func (f *exportFlags) options(now time.Time) (reconstruct.Options, error) {
	o := reconstruct.Options{Format: f.format, Episodes: f.episodes, Workers: f.workers, OnDrift: f.onDrift, Check: f.check}
	o.Filter.TaskID, o.Filter.GroupID, o.Filter.Status = f.task, f.group, f.status
	if f.since != "" {
		if d, err := time.ParseDuration(f.since); err == nil {
			o.Filter.Since = now.Add(-d)
		} else if t, err := time.Parse(time.RFC3339, f.since); err == nil {
			o.Filter.Since = t
		} else {
			return o, fmt.Errorf("--since %q: want an RFC 3339 time or a duration", f.since)
		}
	}
	if !reconstruct.ValidDriftAction(f.onDrift) {
		return o, fmt.Errorf("--on-drift %q: want split, drop or keep", f.onDrift)
	}
	if f.workers < 0 {
		return o, fmt.Errorf("--workers %d: want 0 or more", f.workers)
	}
	for _, known := range reconstruct.Formats {
		if f.format == known {
			return o, nil
		}
	}
	return o, fmt.Errorf("--format %q: want one of %s", f.format, strings.Join(reconstruct.Formats, ", "))
}

func runExport(cmd *cobra.Command, f *exportFlags) error {
	opts, err := f.options(time.Now())
	if err != nil {
		return err
	}
	out, err := openExportOutput(cmd, f)
	if err != nil {
		return err
	}
	defer out.abort()
	src, err := openReadStore(cmd, &f.store)
	if err != nil {
		return err
	}
	defer src.Close()
	stderr := cmd.ErrOrStderr()
	var bar *progressbar.ProgressBar
	start := time.Now()
	if isTerminal(stderr) {
		bar = newExportBar(stderr)
		opts.Progress = func(p reconstruct.Progress) { updateBar(bar, p, start) }
	}
	st, shardMan, err := exportSelection(cmd.Context(), src, out, f, opts)
	if bar != nil {
		_ = bar.Finish()
		fmt.Fprintln(stderr)
	}
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if err := out.commit(); err != nil {
		return err
	}
	if err := shardMan.writeBeside(out.target); err != nil {
		return err
	}
	if f.check || bar != nil || st.BadSegments > 0 || len(st.Unusable) > 0 || len(st.Drift) > 0 {
		printExportReport(stderr, &st, time.Since(start))
	}
	if f.check && st.ViolationCount() > 0 {
		return exitError{code: 1}
	}
	return nil
}

// exportOutput writes to stdout, to nothing, or to a temporary file that
// replaces the target only when the export succeeded.
type exportOutput struct {
	io.Writer
	file   *os.File
	zw     *zstd.Encoder
	target string
	done   bool
}

func openExportOutput(cmd *cobra.Command, f *exportFlags) (*exportOutput, error) {
	switch {
	case f.out == "" && f.check:
		return &exportOutput{Writer: io.Discard}, nil
	case f.out == "" || f.out == "-":
		return &exportOutput{Writer: cmd.OutOrStdout()}, nil
	case !strings.HasSuffix(f.out, ".jsonl") && !strings.HasSuffix(f.out, ".jsonl.zst"):
		return nil, fmt.Errorf("--out %q: want a .jsonl or .jsonl.zst file, or -", f.out)
	}
	tmp, err := os.CreateTemp(filepath.Dir(f.out), "."+filepath.Base(f.out)+".*")
	if err != nil {
		return nil, fmt.Errorf("create output: %w", err)
	}
	o := &exportOutput{Writer: tmp, file: tmp, target: f.out}
	if strings.HasSuffix(f.out, ".zst") {
		if o.zw, err = zstd.NewWriter(tmp); err != nil {
			o.abort()
			return nil, fmt.Errorf("zstd writer: %w", err)
		}
		o.Writer = o.zw
	}
	return o, nil
}

// commit flushes the output and moves it into place.
func (o *exportOutput) commit() error {
	o.done = true
	if o.file == nil {
		return nil
	}
	if o.zw != nil {
		if err := o.zw.Close(); err != nil {
			o.cleanup()
			return fmt.Errorf("compress output: %w", err)
		}
	}
	if err := o.file.Close(); err != nil {
		o.cleanup()
		return fmt.Errorf("write output: %w", err)
	}
	if err := os.Rename(o.file.Name(), o.target); err != nil {
		o.cleanup()
		return fmt.Errorf("rename output: %w", err)
	}
	return nil
}

// abort removes a temporary output that was not committed.
func (o *exportOutput) abort() {
	if o.done || o.file == nil {
		return
	}
	if o.zw != nil {
		o.zw.Close()
	}
	o.file.Close()
	o.cleanup()
}

func (o *exportOutput) cleanup() { os.Remove(o.file.Name()) }

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func newExportBar(w io.Writer) *progressbar.ProgressBar {
	return progressbar.NewOptions64(-1,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription("episodes"),
		progressbar.OptionShowCount(),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(100*time.Millisecond),
	)
}

func updateBar(bar *progressbar.ProgressBar, p reconstruct.Progress, start time.Time) {
	if bar.GetMax64() != int64(p.TotalEpisodes) {
		bar.ChangeMax64(int64(p.TotalEpisodes))
	}
	secs := time.Since(start).Seconds()
	rate := 0.0
	if secs > 0 {
		rate = float64(p.Bytes) / secs / 1e6
	}
	bar.Describe(fmt.Sprintf("episodes (%d calls, %.1f MB/s)", p.Calls, rate))
	_ = bar.Set64(int64(p.Episodes))
}

// printExportReport writes what was read and written, and for --check the
// token drift and violations per class.
func printExportReport(w io.Writer, st *reconstruct.Stats, took time.Duration) {
	mb := float64(st.Bytes) / 1e6
	fmt.Fprintf(w, "exported %d samples from %d episodes (%d calls, %.1f MB) in %s: %.1f MB/s\n",
		st.Samples, st.Episodes, st.Calls, mb, took.Round(time.Millisecond), mb/max(took.Seconds(), 1e-9))
	for _, k := range reconstruct.SortedKeys(st.Unusable) {
		fmt.Fprintf(w, "  unusable calls  %-18s %d\n", k, st.Unusable[k])
	}
	for _, k := range reconstruct.SortedKeys(st.Drift) {
		fmt.Fprintf(w, "  token drift     %-18s %d\n", k, st.Drift[k])
	}
	if st.DroppedSegments > 0 {
		fmt.Fprintf(w, "  dropped segments %d\n", st.DroppedSegments)
	}
	if st.BadSegments > 0 {
		fmt.Fprintf(w, "  segments whose request did not decode (not written) %d\n", st.BadSegments)
	}
	fmt.Fprintf(w, "check: %d token trajectories, %d violations\n", st.Checked, st.ViolationCount())
	for _, k := range reconstruct.SortedKeys(st.Violations) {
		fmt.Fprintf(w, "  violation       %-18s %d\n", k, st.Violations[k])
	}
}
