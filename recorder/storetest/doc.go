// Package storetest is the conformance suite of [recorder.Store]: the
// behaviour every backend (recorder/embedded, recorder/redisstore) must
// share, so that the proxy, the CLI and reconstruct work unchanged on
// either. A backend's tests call [Run] with a function that opens an empty
// store:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) recorder.Store { return openEmpty(t) })
//	}
//
// It also exports the call generators and assertions the suite uses, for a
// backend's own tests (storage size, crash recovery, replicas).
package storetest
