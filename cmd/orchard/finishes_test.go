package main

import (
	"testing"

	"github.com/orchard-rl/orchard/recorder/embedded"
	"github.com/orchard-rl/orchard/recorder/redisstore"
)

// TestFinishFeedWiring: the store orchard proxy opens for --redis is the
// finish feed the proxy publishes and subscribes through; the embedded
// store (one proxy per directory) is none.
func TestFinishFeedWiring(t *testing.T) {
	if finishFeed((*redisstore.Store)(nil)) == nil {
		t.Error("the Redis store is not used as the finish feed")
	}
	if finishFeed((*embedded.Store)(nil)) != nil {
		t.Error("the embedded store is used as a finish feed")
	}
}
