package deploy

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/orchard-rl/orchard/internal/k8stest"
)

func TestMain(m *testing.M) {
	// client-go caches its API-server transports process-wide, so their
	// HTTP/2 read loops outlive the clients; they are not ours to stop.
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) { k8stest.Stop(); os.Exit(code) }),
		goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
		goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"))
}
