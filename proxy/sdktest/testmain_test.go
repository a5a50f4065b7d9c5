// Package sdktest drives the official OpenAI and Anthropic Go SDKs through
// the proxy. It is its own package so that the proxy's own tests do not
// compile the SDKs.
package sdktest

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
