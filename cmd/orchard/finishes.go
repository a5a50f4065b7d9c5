package main

import (
	"github.com/orchard-rl/orchard/proxy/episodes"
	"github.com/orchard-rl/orchard/recorder"
)

// finishFeed returns the store as the episode API's finish feed when it is one
// (the Redis store), else nil: one embedded store has one proxy.
func finishFeed(st recorder.Store) episodes.FinishFeed {
	if f, ok := st.(episodes.FinishFeed); ok {
		return f
	}
	return nil
}
