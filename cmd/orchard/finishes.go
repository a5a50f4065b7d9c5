package main

import (
	"github.com/orchard-rl/orchard/proxy"
	"github.com/orchard-rl/orchard/recorder"
)

// finishFeed returns the store as the proxy's finish feed when it is one
// (the Redis store), else nil: one embedded store has one proxy.
func finishFeed(st recorder.Store) proxy.FinishFeed {
	if f, ok := st.(proxy.FinishFeed); ok {
		return f
	}
	return nil
}
