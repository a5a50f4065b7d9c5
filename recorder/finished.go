package recorder

// FinishGrace is how many calls (of any episode) a store writes after an
// episode finished before it lets go of that episode's dedup encoder.
const FinishGrace = 256

// FinishedEncoders tells a store when to let go of a finished episode's
// dedup encoder. A rollout finishes its episode as soon as the last
// response has reached it, while that call's record is still on its way to
// the store: dropping the encoder at the finish made nearly every
// episode's last call rebuild it, reading back and decoding every stored
// call of the episode. A finished episode's encoder is instead kept until
// FinishGrace more calls have been written; a call of it that arrives
// later rebuilds it, as before. At most FinishGrace finished episodes
// wait: past that (episodes finished faster than calls are written, say
// without any call), the oldest goes at once. The zero value is ready; the
// store's lock guards it.
type FinishedEncoders struct {
	written uint64
	queue   []finishedAt // in finish order
}

type finishedAt struct {
	episode string
	written uint64
}

// Finished notes that episode finished, and calls drop with the oldest
// waiting episode if more than FinishGrace wait.
func (f *FinishedEncoders) Finished(episode string, drop func(episode string)) {
	f.queue = append(f.queue, finishedAt{episode, f.written})
	if len(f.queue) > FinishGrace {
		drop(f.queue[0].episode)
		f.queue = append(f.queue[:0], f.queue[1:]...)
	}
}

// Wrote notes that n more calls were written and calls drop with each
// finished episode whose grace is over.
func (f *FinishedEncoders) Wrote(n int, drop func(episode string)) {
	f.written += uint64(n)
	i := 0
	for i < len(f.queue) && f.written-f.queue[i].written >= FinishGrace {
		drop(f.queue[i].episode)
		i++
	}
	if i > 0 {
		f.queue = append(f.queue[:0], f.queue[i:]...)
	}
}

// Len reports how many finished episodes are still in their grace.
func (f *FinishedEncoders) Len() int { return len(f.queue) }
