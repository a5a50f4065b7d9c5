package local

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/orchard-rl/orchard/envd"
)

// egressServer serves one sandbox's [envd.Egress] gate on a Unix socket
// in its state dir, bound into the jail at egressMount. The agent inside
// listens on loopback and forwards each connection to it.
type egressServer struct {
	srv  *http.Server
	done chan struct{} // closed when Serve has returned
}

// BridgesEgress reports that this backend serves [envd.Spec.Egress]:
// always.
func (b *Backend) BridgesEgress() bool { return true }

// serveEgress starts bx's gate when spec has one.
func (b *Backend) serveEgress(spec *envd.Spec, bx *box) error {
	if spec.Egress == nil {
		return nil
	}
	if spec.Network != envd.NetworkProxy {
		spec.Egress = nil
		return nil
	}
	sock := filepath.Join(bx.dir, "egress.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("listen on egress socket: %w", err)
	}
	// The sandbox user connects; connect(2) needs write permission.
	if err := os.Chmod(sock, 0o666); err != nil {
		ln.Close()
		return fmt.Errorf("egress socket: %w", err)
	}
	es := &egressServer{srv: &http.Server{Handler: spec.Egress.Handler, ReadHeaderTimeout: 30 * time.Second},
		done: make(chan struct{})}
	go es.serve(ln)
	bx.egress = es
	return nil
}

func (es *egressServer) serve(ln net.Listener) {
	defer close(es.done)
	if err := es.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return // the listener failed; the sandbox's model calls fail with it
	}
}

// close stops the gate, cutting calls in flight, and waits for it.
func (es *egressServer) close() {
	if es == nil {
		return
	}
	_ = es.srv.Close()
	<-es.done
}
