package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

func newExportMergeCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "merge SHARD.jsonl...",
		Short: "Join the files of a sharded export into one, in unsharded order",
		Long: "Merge reads the manifest beside each shard file (FILE.shard.json, written by export --shard),\n" +
			"checks that shards 0..N-1 of one selection are all there exactly once, and writes their\n" +
			"samples in the order the unsharded export writes them.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runExportMerge(cmd, out, args) },
	}
	cmd.Flags().StringVar(&out, "out", "", "output file (.jsonl or .jsonl.zst), or - for stdout (default stdout)")
	return cmd
}

// mergePart is one shard: its manifest and the file it describes.
type mergePart struct {
	man  shardManifest
	path string
}

func runExportMerge(cmd *cobra.Command, out string, args []string) error {
	parts, err := loadShards(args)
	if err != nil {
		return err
	}
	order, err := mergeOrder(parts)
	if err != nil {
		return err
	}
	w, err := openExportOutput(cmd, &exportFlags{out: out}, out)
	if err != nil {
		return err
	}
	defer w.abort()
	if err := copyInOrder(w, parts, order); err != nil {
		return err
	}
	return w.commit()
}

// loadShards reads each argument's manifest (the argument may name the
// shard file or its manifest).
func loadShards(args []string) ([]mergePart, error) {
	var parts []mergePart
	for _, a := range args {
		path := strings.TrimSuffix(a, ".shard.json")
		b, err := os.ReadFile(path + ".shard.json")
		if err != nil {
			return nil, fmt.Errorf("read shard manifest: %w (export --shard writes it beside --out)", err)
		}
		var m shardManifest
		if err := json.Unmarshal(b, &m); err != nil || m.Schema != shardSchema {
			return nil, fmt.Errorf("%s.shard.json: not an %s manifest (%v)", path, shardSchema, err)
		}
		if !strings.HasSuffix(path, ".jsonl") {
			return nil, fmt.Errorf("%s: merge reads .jsonl shards (export each shard uncompressed)", path)
		}
		parts = append(parts, mergePart{man: m, path: filepath.Join(filepath.Dir(path), m.File)})
	}
	return parts, nil
}

// mergeOrder checks that parts are the complete shards of one selection
// and returns (part, episode) pairs in unsharded order.
func mergeOrder(parts []mergePart) ([][2]int, error) {
	first := parts[0].man
	seen := make([]bool, first.Of)
	order := make([][2]int, first.Total)
	taken := make([]bool, first.Total)
	placed := 0
	for pi, p := range parts {
		m := p.man
		if m.Of != first.Of || m.Listing != first.Listing || m.Format != first.Format || m.Total != first.Total {
			return nil, fmt.Errorf("%s: shard %d/%d of another export (format %s, listing %.12s) than %s",
				p.path, m.Shard, m.Of, m.Format, m.Listing, parts[0].path)
		}
		if m.Shard < 0 || m.Shard >= m.Of || seen[m.Shard] {
			return nil, fmt.Errorf("%s: shard %d/%d given twice or out of range", p.path, m.Shard, m.Of)
		}
		seen[m.Shard] = true
		for ei, e := range m.Episodes {
			if e.Index < 0 || e.Index >= m.Total || taken[e.Index] {
				return nil, fmt.Errorf("%s: episode %s at index %d clashes with another shard", p.path, e.ID, e.Index)
			}
			order[e.Index], taken[e.Index] = [2]int{pi, ei}, true
			placed++
		}
	}
	if i := slices.Index(seen, false); i >= 0 {
		return nil, fmt.Errorf("shard %d/%d missing: merge needs all %d shards", i, first.Of, first.Of)
	}
	if placed != first.Total {
		return nil, fmt.Errorf("shards hold %d episodes, the selection %d", placed, first.Total)
	}
	return order, nil
}

// copyInOrder writes each episode's bytes from its shard file to w.
func copyInOrder(w io.Writer, parts []mergePart, order [][2]int) error {
	files := make([]*os.File, len(parts))
	for i, p := range parts {
		f, err := os.Open(p.path)
		if err != nil {
			return fmt.Errorf("open shard: %w", err)
		}
		defer f.Close()
		files[i] = f
	}
	for _, o := range order {
		e := parts[o[0]].man.Episodes[o[1]]
		n, err := io.Copy(w, io.NewSectionReader(files[o[0]], e.Offset, e.Bytes))
		if err != nil {
			return fmt.Errorf("copy episode %s: %w", e.ID, err)
		}
		if n != e.Bytes {
			return fmt.Errorf("%s: episode %s: %d of %d bytes (file shorter than its manifest)", parts[o[0]].path, e.ID, n, e.Bytes)
		}
	}
	return nil
}
