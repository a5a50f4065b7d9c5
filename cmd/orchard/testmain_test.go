package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain doubles as the orchard binary when ORCHARD_TEST_MAIN=1, so that
// tests can run, kill and restart real orchard processes without a build.
func TestMain(m *testing.M) {
	if os.Getenv("ORCHARD_TEST_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}
