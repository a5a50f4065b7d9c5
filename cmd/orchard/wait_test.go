package main

import "time"

// waitABit paces a poll loop whose exit condition is checked by the caller.
func waitABit() { time.Sleep(10 * time.Millisecond) }
