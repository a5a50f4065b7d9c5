package recorder

// IdleEncoders tells a store when to compact an episode's dedup encoder
// (see [EpisodeEncoder.Compact]): once the episode went Max writes of the
// store (a write of one episode's calls, whichever episode) without one
// of its own. An episode that runs is written about once per round of the
// episodes running beside it, which a store's episode bound (Max) is
// meant to exceed, so this finds the episodes that stopped or pause long
// and leaves the running ones whole. The store counts its writes (tick)
// and notes each encoder's last; the store's lock guards the value.
type IdleEncoders struct {
	Max   int
	swept uint64 // tick at the last look
}

// Due reports whether the store should look for idle encoders at tick:
// every Max/2 writes, so that a look over at most Max encoders costs about
// two per write.
func (ie *IdleEncoders) Due(tick uint64) bool {
	if tick-ie.swept < max(uint64(ie.Max)/2, 1) {
		return false
	}
	ie.swept = tick
	return true
}

// Idle reports whether an encoder last written at used is idle at tick.
func (ie *IdleEncoders) Idle(tick, used uint64) bool { return tick-used >= uint64(ie.Max) }
