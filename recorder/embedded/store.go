package embedded

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/orchard-rl/orchard/recorder"
)

var (
	// ErrLocked is returned by [Open] when another process writes the dir.
	ErrLocked = errors.New("data directory is locked by another writer")
	// ErrReadOnly is returned by the write methods of a store opened with
	// [OpenReadOnly].
	ErrReadOnly = errors.New("store is read-only")
	// ErrClosed is returned by every method after Close.
	ErrClosed = errors.New("store is closed")
)

// Options configure a writable store. The zero value is the default.
type Options struct {
	// SegmentBytes is the size at which the log rotates to a new segment.
	// Default 64 MiB.
	SegmentBytes int64
	// NoDedup stores every call's bodies whole (for measurements only).
	NoDedup bool
	// NoSync skips fsync: writes survive a crash of the process but not of
	// the machine. For tests and measurements only.
	NoSync bool
	// Logger receives warnings about skipped corrupt frames. Nil discards.
	Logger *slog.Logger
	// MaxEncoders bounds how many episodes keep dedup state in memory
	// (a few KB to a few hundred KB each). Default 1024. An episode that
	// goes this many writes without a call keeps only what its latest
	// call needs (see [recorder.EpisodeEncoder.Compact]).
	MaxEncoders int
	// MaxEncoderBytes bounds the memory of that state, as
	// [recorder.EpisodeEncoder.Bytes] estimates it: past it the least
	// recently written episodes lose theirs (and rebuild it from the store
	// if written again). Default 64 MiB.
	MaxEncoderBytes int
}

const defaultSegmentBytes = 64 << 20

// Store is the embedded [recorder.Store]. All methods are safe for
// concurrent use.
type Store struct {
	dir      string
	opts     Options
	readOnly bool
	log      *slog.Logger
	lock     *os.File // nil for read-only stores

	syncMu    sync.Mutex // guards following; taken before mu, never while holding it
	syncCond  *sync.Cond
	syncing   bool  // an fsync is in flight
	syncedPos int64 // appended bytes known durable
	syncErr   error // sticky fsync failure

	mu          sync.RWMutex // guards following
	idx         *index
	files       map[int]*os.File // every segment, open for reading
	active      *os.File         // writer: segment being appended to
	segs        []int            // segment numbers seen, ascending
	size        int64            // writer: size of the active segment; reader: scan offset in the last segment
	appended    int64            // writer: bytes appended since Open, across segments
	encoders    map[string]*recorder.EpisodeEncoder
	encoderUse  map[string]uint64 // episode -> encoderTick of its last write
	encoderTick uint64
	encoderSize map[string]int // episode -> its encoder's Bytes after its last write
	encoderSum  int            // of encoderSize
	evictions   uint64         // encoders dropped by the bounds
	rebuilds    uint64         // encoders rebuilt from stored calls
	compactions uint64         // encoders compacted as idle
	idle        recorder.IdleEncoders
	finished    recorder.FinishedEncoders
	broken      error // sticky write failure: the log tail may be inconsistent
	damage      Damage
	closed      bool
}

var _ recorder.Store = (*Store)(nil)

// Open opens dir for reading and writing, creating it if needed. It takes
// an exclusive lock on the directory ([ErrLocked] if another process holds
// it), scans every segment to build the index, and cuts a torn frame off
// the end of the last segment.
func Open(dir string, opts Options) (*Store, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	s := newStore(dir, opts, false)
	s.lock = lock
	if err := s.openWriter(); err != nil {
		s.closeFiles()
		unlockDir(lock)
		return nil, err
	}
	return s, nil
}

// OpenReadOnly opens dir for reading without taking its lock, so it works
// beside a process that writes it. Each read first scans what was appended
// since the previous one. A missing dir is an error wrapping fs.ErrNotExist.
func OpenReadOnly(dir string) (*Store, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("open data dir: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("open data dir %s: not a directory", dir)
	}
	s := newStore(dir, Options{}, true)
	if err := s.refreshLocked(); err != nil {
		s.closeFiles()
		return nil, err
	}
	return s, nil
}

func newStore(dir string, opts Options, readOnly bool) *Store {
	opts.defaults()
	s := &Store{
		dir: dir, opts: opts, readOnly: readOnly, log: opts.Logger,
		idx: newIndex(), files: map[int]*os.File{}, encoders: map[string]*recorder.EpisodeEncoder{},
		encoderUse: map[string]uint64{}, encoderSize: map[string]int{}, idle: recorder.IdleEncoders{Max: opts.MaxEncoders},
	}
	s.syncCond = sync.NewCond(&s.syncMu)
	return s
}

// defaults fills the zero fields of o.
func (o *Options) defaults() {
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = defaultSegmentBytes
	}
	if o.MaxEncoderBytes <= 0 {
		o.MaxEncoderBytes = 64 << 20
	}
	if o.MaxEncoders <= 0 {
		o.MaxEncoders = 1024
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

func segPath(dir string, n int) string { return filepath.Join(dir, fmt.Sprintf("%010d.seg", n)) }

// listSegments returns the segment numbers in dir, ascending.
func listSegments(dir string) ([]int, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list segments: %w", err)
	}
	var out []int
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".seg")
		if n, err := strconv.Atoi(name); ok && err == nil && n > 0 {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// openWriter scans all segments and opens the last one for appending.
func (s *Store) openWriter() error {
	segs, err := listSegments(s.dir)
	if err != nil {
		return err
	}
	if len(segs) == 0 {
		segs = []int{1}
	}
	for i, n := range segs {
		last := i == len(segs)-1
		flag := os.O_RDONLY
		if last {
			flag = os.O_RDWR | os.O_CREATE | os.O_APPEND
		}
		f, err := os.OpenFile(segPath(s.dir, n), flag, 0o644)
		if err != nil {
			return fmt.Errorf("open segment: %w", err)
		}
		s.files[n], s.segs = f, append(s.segs, n)
		end, err := s.scanSegment(n, f, 0)
		if err != nil && !errors.Is(err, errTorn) {
			return err
		}
		if err != nil && !last {
			s.skipRest(n, f, end)
		}
		if last {
			if err := s.truncateTail(f, end); err != nil {
				return err
			}
			s.active, s.size = f, end
		}
	}
	return nil
}

// truncateTail cuts f at end (dropping a torn frame) and syncs the cut.
func (s *Store) truncateTail(f *os.File, end int64) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat segment: %w", err)
	}
	if fi.Size() == end {
		return nil
	}
	s.log.Warn("cutting torn frame off the log", "segment", f.Name(), "offset", end, "bytes", fi.Size()-end)
	if err := f.Truncate(end); err != nil {
		return fmt.Errorf("truncate torn tail: %w", err)
	}
	return f.Sync()
}

// scanSegment applies the frames of f from off on and returns the end of
// the last whole frame. Frames that parse badly are logged and skipped;
// damaged bytes between valid frames are logged and counted.
func (s *Store) scanSegment(n int, f *os.File, off int64) (int64, error) {
	return scanFrames(f, off, func(at int64, p []byte) error {
		if err := s.idx.apply(n, at, p); err != nil {
			s.log.Warn("skipping unreadable frame", "segment", n, "offset", at, "err", err)
		}
		return nil
	}, func(at, bytes int64) { s.skipped(n, at, bytes) })
}

// Damage counts the log bytes that scans skipped because they did not form
// valid frames: damaged frames with valid ones after them, and the torn
// rest of a segment that is not the newest. A torn tail of the newest
// segment is not damage: it is a write in progress, or a crash mid-append
// that a writer cuts off.
type Damage struct {
	Regions int   // runs of adjacent bad bytes, each one or more frames
	Bytes   int64 // bytes in them
}

// Damaged returns what the scans of the log skipped so far.
func (s *Store) Damaged() (Damage, error) {
	var d Damage
	err := s.view(func() error { d = s.damage; return nil })
	return d, err
}

func (s *Store) skipped(seg int, off, bytes int64) {
	s.damage.Regions++
	s.damage.Bytes += bytes
	s.log.Warn("skipping damaged bytes in the log", "segment", seg, "offset", off, "bytes", bytes)
}

// skipRest counts the torn end of an older segment as damage.
func (s *Store) skipRest(seg int, f *os.File, end int64) {
	if fi, err := f.Stat(); err == nil && fi.Size() > end {
		s.skipped(seg, end, fi.Size()-end)
	}
}

// refreshLocked brings a read-only store's index up to date with what the
// writer appended: the rest of the current segment, then newer segments. A
// torn frame at the end of the newest segment is a write in progress and is
// retried next time.
func (s *Store) refreshLocked() error {
	segs, err := listSegments(s.dir)
	if err != nil {
		return err
	}
	for _, n := range segs {
		if len(s.segs) > 0 && n < s.segs[len(s.segs)-1] {
			continue
		}
		f := s.files[n]
		if f == nil {
			if f, err = os.Open(segPath(s.dir, n)); err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				return fmt.Errorf("open segment: %w", err)
			}
			s.files[n], s.segs, s.size = f, append(s.segs, n), 0
		}
		end, err := s.scanSegment(n, f, s.size)
		s.size = end
		if err != nil && !errors.Is(err, errTorn) {
			return err
		}
		if err != nil && n != segs[len(segs)-1] {
			s.skipRest(n, f, end)
		}
	}
	return nil
}

// Close syncs and closes the log and releases the lock.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.closed = true
	var err error
	if s.active != nil && !s.opts.NoSync {
		err = s.active.Sync()
	}
	err = errors.Join(err, s.closeFiles())
	if s.lock != nil {
		err = errors.Join(err, unlockDir(s.lock))
	}
	return err
}

func (s *Store) closeFiles() error {
	var err error
	for _, f := range s.files {
		err = errors.Join(err, f.Close())
	}
	return err
}
