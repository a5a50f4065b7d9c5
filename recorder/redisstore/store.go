package redisstore

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/orchard-rl/orchard/recorder"
)

// ErrClosed is returned by every method after Close.
var ErrClosed = errors.New("store is closed")

// Options configure a store. The zero value is the default.
type Options struct {
	// Prefix starts every key (default "orchard"). Stores with different
	// prefixes share a Redis without seeing each other. No braces.
	Prefix string
	// Retention is how long a finished episode (PutEpisode with FinishedAt
	// set) is kept: its keys get this expiry, counted from that PutEpisode.
	// 0 keeps episodes until they are deleted or collected by GC.
	Retention time.Duration
	// NoDedup stores every call's bodies whole (for measurements only).
	NoDedup bool
	// MaxEncoders bounds how many episodes keep a dedup encoder in memory
	// (least recently written first out; default 1024). An evicted
	// episode's encoder is rebuilt from Redis on its next write. An
	// episode that goes this many writes without a call keeps only what
	// its latest call needs (see [recorder.EpisodeEncoder.Compact]).
	MaxEncoders int
	// MaxEncoderBytes bounds the memory of those encoders, as
	// [recorder.EpisodeEncoder.Bytes] estimates it (least recently written
	// first out; default 64 MiB).
	MaxEncoderBytes int
	// TLS overrides the TLS configuration of rediss:// URLs (for a private
	// CA or client certificates). Nil uses the system roots and the URL's
	// host name.
	TLS *tls.Config
	// StartDown makes Open succeed when Redis does not answer: the store
	// is returned (the client reconnects on its own) and its calls fail
	// until Redis is back. The proxy uses it so that it starts and spills
	// during an outage, and replays when Redis returns.
	StartDown bool
	// Logger receives warnings about unreadable stored frames. Nil discards.
	Logger *slog.Logger
}

const (
	defaultPrefix      = "orchard"
	defaultMaxEncoders = 1024
	defaultEncoderMem  = 64 << 20
)

// Store is the Redis [recorder.Store]. Several Stores (one per proxy
// replica) may write the same Redis and the same episodes at once. All
// methods are safe for concurrent use.
type Store struct {
	rdb  redis.UniversalClient
	opts Options
	keys keys
	log  *slog.Logger
	encs *encoders
}

var _ recorder.Store = (*Store)(nil)

// Open connects to the Redis at url and checks that it answers PING.
// Accepted URLs (see [ParseURL]):
//
//	redis://[user:password@]host:port[/db][?options]
//	rediss://...                                   (TLS)
//	redis+cluster://[user:password@]host1:port1,host2:port2[?options]
//	rediss+cluster://...                           (Redis Cluster over TLS)
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	opts.defaults()
	if err := validPrefix(opts.Prefix); err != nil {
		return nil, err
	}
	rdb, err := ParseURL(url, opts.TLS)
	if err != nil {
		return nil, err
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		if !opts.StartDown {
			rdb.Close()
			return nil, fmt.Errorf("connect to redis %s: %w", redactURL(url), err)
		}
		opts.Logger.Warn("redis does not answer; starting anyway, calls spill until it does", "redis", redactURL(url), "err", err)
	}
	return &Store{rdb: rdb, opts: opts, keys: keys{prefix: opts.Prefix}, log: opts.Logger, encs: newEncoders(opts.MaxEncoders, opts.MaxEncoderBytes)}, nil
}

// defaults fills the zero fields of o.
func (o *Options) defaults() {
	if o.Prefix == "" {
		o.Prefix = defaultPrefix
	}
	if o.MaxEncoders <= 0 {
		o.MaxEncoders = defaultMaxEncoders
	}
	if o.MaxEncoderBytes <= 0 {
		o.MaxEncoderBytes = defaultEncoderMem
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// DedupStats reports the encoders this process keeps in memory.
func (s *Store) DedupStats() recorder.DedupStats { return s.encs.stats() }

// Close closes the connections. Calls in flight fail with an error.
func (s *Store) Close() error {
	if err := s.rdb.Close(); err != nil {
		if errors.Is(err, redis.ErrClosed) {
			return ErrClosed
		}
		return fmt.Errorf("close redis client: %w", err)
	}
	return nil
}

// wrapErr maps the client's closed error to ErrClosed.
func wrapErr(err error) error {
	if errors.Is(err, redis.ErrClosed) {
		return ErrClosed
	}
	return err
}

// nonce returns a fresh random incarnation id.
func nonce() string {
	var b [12]byte
	rand.Read(b[:]) // never fails (crypto/rand docs)
	return hex.EncodeToString(b[:])
}
