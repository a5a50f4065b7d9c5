package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/orchard-rl/orchard/reconstruct"
	"github.com/orchard-rl/orchard/rl/value"
)

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
	trainer  trainerFlags
	rewards  rewardFlags
	value    valueFlags
	shard    string
}

// trainerFlags are the flags that shape trainer-ready output.
type trainerFlags struct {
	requireTokens bool
	splitByTokens bool
	strict        bool
	toolsAs       string
}

// addTrainerFlags registers the trainer output flags of `orchard export`.
func addTrainerFlags(cmd *cobra.Command, f *trainerFlags) {
	fl := cmd.Flags()
	fl.BoolVar(&f.requireTokens, "require-tokens", false, "drop (and count) samples without token ids")
	fl.BoolVar(&f.splitByTokens, "split-by-tokens", false, "write samples without token ids to a second file beside --out (NAME.no-ids.EXT)")
	fl.BoolVar(&f.strict, "strict", false, "exit 1 when a stored record could not be decoded, or any sample was dropped, lacks token ids (unchecked) or breaks --check")
	fl.StringVar(&f.toolsAs, "tools-as", reconstruct.ToolsAsStrings, "trainer formats: tools and tool-call arguments as JSON text (strings) or JSON values (objects, JSONL only)")
}

func newExportCmd() *cobra.Command {
	var f exportFlags
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Rebuild recorded episodes into training samples (JSONL or parquet)",
		Long: "Export reconstructs recorded episodes into turn-level or trajectory-level training samples,\n" +
			"one JSON object per line (docs/sample-format.md). --check verifies token trajectories and\n" +
			"exits 1 when a sample breaks them.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runExport(cmd, &f) },
	}
	addStoreFlags(cmd, &f.store)
	fl := cmd.Flags()
	fl.StringVar(&f.format, "format", reconstruct.FormatTrajectories, "output format: "+strings.Join(reconstruct.Formats, "|")+"|"+value.Format+"|ca-sft (ca-sft needs --rewards)")
	f.value.register(fl)
	fl.StringVar(&f.out, "out", "", "output file (.jsonl, .jsonl.zst or .parquet), or - for stdout (default stdout; discarded with --check)")
	fl.StringVar(&f.task, "task-id", "", "only episodes of this task id")
	fl.StringVar(&f.group, "group-id", "", "only episodes of this group id")
	aliasIDFlags(fl)
	fl.StringVar(&f.status, "status", "", "only episodes with this status (running|success|failure|error|timeout)")
	fl.StringVar(&f.since, "since", "", "only episodes created at or after this time (RFC 3339) or this long ago (Go duration, e.g. 24h)")
	fl.StringSliceVar(&f.episodes, "episodes", nil, "export exactly these episode ids, in this order (comma-separated)")
	fl.IntVar(&f.workers, "workers", 0, "episodes reconstructed in parallel (0: one per CPU); output order is the same for any value")
	fl.BoolVar(&f.check, "check", false, "verify every token trajectory and report violations per drift class")
	fl.StringVar(&f.onDrift, "on-drift", reconstruct.DriftSplit, "what to do when token ids break inside a segment: split|drop|keep")
	addTrainerFlags(cmd, &f.trainer)
	addRewardFlags(cmd, &f.rewards, "")
	fl.StringVar(&f.shard, "shard", "", "export only shard I of N (I/N, 0-based; by episode id hash) and write FILE.shard.json beside --out for export merge")
	cmd.AddCommand(newExportMergeCmd())
	return cmd
}

// exportOptions validates the flags into export options.
func (f *exportFlags) options(now time.Time) (reconstruct.Options, error) {
	o := reconstruct.Options{Format: f.format, Episodes: f.episodes, Workers: f.workers, OnDrift: f.onDrift, Check: f.check,
		RequireTokens: f.trainer.requireTokens, ToolsAs: f.trainer.toolsAs}
	if strings.HasSuffix(f.out, ".parquet") {
		o.Encoding = reconstruct.EncodingParquet
	}
	if err := f.trainer.validate(f); err != nil {
		return o, err
	}
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
	if ok, err := f.rewards.checkFormat(f.format); ok {
		return o, err
	}
	for _, known := range append(reconstruct.Formats, value.Format) {
		if f.format == known {
			return o, nil
		}
	}
	return o, fmt.Errorf("--format %q: want one of %s", f.format, strings.Join(reconstruct.Formats, ", "))
}

func (t *trainerFlags) validate(f *exportFlags) error {
	if t.toolsAs != reconstruct.ToolsAsStrings && t.toolsAs != reconstruct.ToolsAsObjects {
		return fmt.Errorf("--tools-as %q: want strings or objects", t.toolsAs)
	}
	if t.toolsAs == reconstruct.ToolsAsObjects && strings.HasSuffix(f.out, ".parquet") {
		return fmt.Errorf("--tools-as objects: JSONL only (a parquet column merges the tool shapes of all rows, adding null members)")
	}
	if t.splitByTokens && (f.out == "" || f.out == "-") {
		return fmt.Errorf("--split-by-tokens: needs --out FILE (the second file goes beside it)")
	}
	if strings.HasSuffix(f.out, ".parquet") && !slices.Contains(reconstruct.TrainerFormats, f.format) {
		return fmt.Errorf("--out %s: parquet is for the trainer formats (%s); %s is JSONL only", f.out, strings.Join(reconstruct.TrainerFormats, ", "), f.format)
	}
	return nil
}

// noIDsPath is the --split-by-tokens file beside out: NAME.no-ids.EXT.
func noIDsPath(out string) string {
	for _, ext := range []string{".jsonl.zst", ".jsonl", ".parquet"} {
		if base, ok := strings.CutSuffix(out, ext); ok {
			return base + ".no-ids" + ext
		}
	}
	return out + ".no-ids"
}

func runExport(cmd *cobra.Command, f *exportFlags) error {
	opts, err := f.options(time.Now())
	if err != nil {
		return err
	}
	out, err := openExportOutput(cmd, f, f.out)
	if err != nil {
		return err
	}
	defer out.abort()
	var noIDs *exportOutput
	if f.trainer.splitByTokens {
		if noIDs, err = openExportOutput(cmd, f, noIDsPath(f.out)); err != nil {
			return err
		}
		defer noIDs.abort()
		opts.NoTokens = noIDs
	}
	// reconstruct classifies each episode's lineage itself, so the
	// store's recorded lineage is read as it is, not classified again.
	src, err := openRawReadStore(cmd, &f.store)
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
	qs := &quarantineSource{Store: src}
	st, shardMan, err := exportSelection(cmd.Context(), qs, out, f, opts, func(ctx context.Context, src reconstruct.Source, w io.Writer, opts reconstruct.Options) (reconstruct.Stats, error) {
		if opts.Format == value.Format {
			return f.value.exportSamples(ctx, src, w, opts)
		}
		return f.rewards.export(cmd, src, w, opts)
	})
	if bar != nil {
		_ = bar.Finish()
		fmt.Fprintln(stderr)
	}
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if err := qs.report(stderr, f.trainer.strict); err != nil {
		return err // --strict: the output is not written
	}
	if err := out.commit(); err != nil {
		return err
	}
	if noIDs != nil {
		if err := noIDs.commit(); err != nil {
			return err
		}
	}
	if err := shardMan.writeBeside(out.target); err != nil {
		return err
	}
	if f.check || f.trainer.strict || bar != nil || st.BadSegments > 0 || len(st.Unusable) > 0 || len(st.Drift) > 0 || len(st.Dropped) > 0 {
		printExportReport(stderr, f.format, &st, time.Since(start))
	}
	if f.check && st.ViolationCount() > 0 || f.trainer.strict && !strictOK(&st) {
		return exitError{code: 1}
	}
	return nil
}

// strictOK reports whether nothing was dropped or left unchecked: every
// sample has token ids and every segment gave its samples.
func strictOK(st *reconstruct.Stats) bool {
	return st.WithoutIDs == 0 && len(st.Dropped) == 0 && st.DroppedSegments == 0 && st.BadSegments == 0 && st.ViolationCount() == 0
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

func openExportOutput(cmd *cobra.Command, f *exportFlags, path string) (*exportOutput, error) {
	switch {
	case path == "" && f.check:
		return &exportOutput{Writer: io.Discard}, nil
	case path == "" || path == "-":
		return &exportOutput{Writer: cmd.OutOrStdout()}, nil
	case !strings.HasSuffix(path, ".jsonl") && !strings.HasSuffix(path, ".jsonl.zst") && !strings.HasSuffix(path, ".parquet"):
		return nil, fmt.Errorf("--out %q: want a .jsonl, .jsonl.zst or .parquet file, or -", path)
	}
	tmp, err := createTemp(path)
	if err != nil {
		return nil, fmt.Errorf("create output: %w", err)
	}
	o := &exportOutput{Writer: tmp, file: tmp, target: path}
	if strings.HasSuffix(path, ".zst") {
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

// createTemp creates a new temporary file beside path with mode 0666
// less the umask (os.CreateTemp's 0600 would keep a trainer running as
// another user from reading the export).
func createTemp(path string) (*os.File, error) {
	dir, base := filepath.Dir(path), filepath.Base(path)
	for range 100 {
		name := filepath.Join(dir, "."+base+"."+strconv.FormatUint(rand.Uint64(), 36))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if !errors.Is(err, fs.ErrExist) {
			return f, err
		}
	}
	return nil, fmt.Errorf("create temporary file beside %s: too many collisions", path)
}

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
func printExportReport(w io.Writer, format string, st *reconstruct.Stats, took time.Duration) {
	mb := float64(st.Bytes) / 1e6
	fmt.Fprintf(w, "exported %d samples from %d episodes (%d calls, %.1f MB) in %s: %.1f MB/s\n",
		st.Samples, st.Episodes, st.Calls, mb, took.Round(time.Millisecond), mb/max(took.Seconds(), 1e-9))
	fmt.Fprintf(w, "  format %s: %d samples with token ids, %d without\n", format, st.WithIDs, st.WithoutIDs)
	for _, k := range reconstruct.SortedKeys(st.Dropped) {
		fmt.Fprintf(w, "  dropped         %-18s %d\n", k, st.Dropped[k])
	}
	if st.WithIDs == 0 && (st.WithoutIDs > 0 || st.Dropped[reconstruct.DropNoTokenIDs] > 0) {
		fmt.Fprintln(w, "  hint: no sample has token ids; record with --upstream-kind vllm or sglang")
	}
	if format == reconstruct.FormatTRL && st.WithIDs > 0 && st.WithoutIDs > 0 {
		fmt.Fprintln(w, "  warning: TRL rows with and without token ids in one file (TRL cannot load it); use --split-by-tokens or --require-tokens")
	}
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
