package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/orchard-rl/orchard/reconstruct"
	"github.com/orchard-rl/orchard/recorder"
)

// shard is one part of a sharded export: the episodes whose id hashes to
// Index modulo Of. The hash is FNV-1a 64 of the episode id, so the
// partition depends on the ids only, never on listing order or worker.
type shard struct {
	Index, Of int
}

// parseShard parses "I/N" with 0 <= I < N.
func parseShard(s string) (shard, error) {
	i, n, ok := strings.Cut(s, "/")
	idx, err1 := strconv.Atoi(i)
	of, err2 := strconv.Atoi(n)
	if !ok || err1 != nil || err2 != nil || of < 1 || idx < 0 || idx >= of {
		return shard{}, fmt.Errorf("--shard %q: want I/N with 0 <= I < N, e.g. 0/4", s)
	}
	return shard{Index: idx, Of: of}, nil
}

// owns reports whether episode id belongs to the shard.
func (s shard) owns(id string) bool {
	h := fnv.New64a()
	h.Write([]byte(id))
	return h.Sum64()%uint64(s.Of) == uint64(s.Index)
}

// shardManifest describes one shard's output file, written beside it as
// FILE.shard.json; `orchard export merge` reads them back.
type shardManifest struct {
	Schema  string `json:"schema"`
	Shard   int    `json:"shard"`
	Of      int    `json:"of"`
	Format  string `json:"format"`
	File    string `json:"file"` // base name, beside the manifest
	Listing string `json:"listing"`
	// Total is the number of episodes in the unsharded selection.
	Total    int            `json:"total_episodes"`
	Episodes []shardEpisode `json:"episodes"`
}

// shardEpisode is one episode of a shard: its place in the unsharded
// export and the bytes of the shard file that hold its samples.
type shardEpisode struct {
	ID     string `json:"id"`
	Index  int    `json:"index"`
	Offset int64  `json:"offset"`
	Bytes  int64  `json:"bytes"`
}

const shardSchema = "orchard.export-shard/v1"

// selectAll returns the ids of the unsharded selection, in export order.
func selectAll(ctx context.Context, src recorder.Store, opts *reconstruct.Options) ([]string, error) {
	if len(opts.Episodes) > 0 {
		return opts.Episodes, nil
	}
	f := opts.Filter
	var ids []string
	for {
		page, cursor, err := src.ListEpisodes(ctx, f)
		if err != nil {
			return nil, fmt.Errorf("list episodes: %w", err)
		}
		for _, e := range page {
			ids = append(ids, e.ID)
		}
		if cursor == "" || (f.Limit > 0 && len(ids) >= f.Limit) {
			break
		}
		f.Cursor = cursor
	}
	if f.Limit > 0 && len(ids) > f.Limit {
		ids = ids[:f.Limit]
	}
	return ids, nil
}

// applyShard narrows opts to the shard's episodes and returns the manifest
// to fill as they are written (nil when f has no --shard). An empty shard
// leaves opts.Episodes empty: the caller then writes nothing.
func applyShard(ctx context.Context, src recorder.Store, f *exportFlags, opts *reconstruct.Options) (*shardManifest, error) {
	if f.shard == "" {
		return nil, nil
	}
	s, err := parseShard(f.shard)
	if err != nil {
		return nil, err
	}
	all, err := selectAll(ctx, src, opts)
	if err != nil {
		return nil, err
	}
	m := &shardManifest{Schema: shardSchema, Shard: s.Index, Of: s.Of, Format: opts.Format,
		File: filepath.Base(f.out), Listing: listingDigest(all), Total: len(all)}
	opts.Episodes = nil
	for i, id := range all {
		if s.owns(id) {
			opts.Episodes = append(opts.Episodes, id)
			m.Episodes = append(m.Episodes, shardEpisode{ID: id, Index: i})
		}
	}
	return m, nil
}

// listingDigest identifies the unsharded selection, so that merge refuses
// shards cut from different listings.
func listingDigest(ids []string) string {
	h := sha256.New()
	for _, id := range ids {
		h.Write([]byte(id))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// track wraps w and records, as each episode is written (Progress follows
// every episode's write, in order), which bytes hold its samples.
func (m *shardManifest) track(w io.Writer, opts *reconstruct.Options) io.Writer {
	cw := &countingWriter{w: w}
	next, prev := opts.Progress, int64(0)
	opts.Progress = func(p reconstruct.Progress) {
		if e := p.Episodes - 1; e >= 0 && e < len(m.Episodes) {
			m.Episodes[e].Offset, m.Episodes[e].Bytes = prev, cw.n-prev
			prev = cw.n
		}
		if next != nil {
			next(p)
		}
	}
	return cw
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// write stores the manifest as out + ".shard.json".
func (m *shardManifest) write(out string) error {
	b, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return fmt.Errorf("encode shard manifest: %w", err)
	}
	if err := os.WriteFile(out+".shard.json", append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write shard manifest: %w", err)
	}
	return nil
}

// exportSelection runs the export, narrowed to f's --shard when set. It
// returns the shard's manifest (nil without --shard).
func exportSelection(ctx context.Context, src recorder.Store, w io.Writer, f *exportFlags, opts reconstruct.Options, export exportFunc) (reconstruct.Stats, *shardManifest, error) {
	man, err := applyShard(ctx, src, f, &opts)
	if err != nil {
		return reconstruct.Stats{}, nil, err
	}
	if man == nil {
		st, err := export(ctx, src, w, opts)
		return st, nil, err
	}
	if len(opts.Episodes) == 0 {
		return reconstruct.Stats{}, man, nil // an empty shard: Export would take no ids as all
	}
	st, err := export(ctx, src, man.track(w, &opts), opts)
	return st, man, err
}

// exportFunc writes the samples opts selects from src to w.
type exportFunc func(ctx context.Context, src reconstruct.Source, w io.Writer, opts reconstruct.Options) (reconstruct.Stats, error)

// writeBeside writes the manifest beside a shard's output file; it does
// nothing without a manifest or an output file.
func (m *shardManifest) writeBeside(out string) error {
	if m == nil || out == "" {
		return nil
	}
	return m.write(out)
}
