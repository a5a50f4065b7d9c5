package main

import (
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/spf13/pflag"
)

// serverLimits are the proxy's spill location and the limits that keep a
// hostile or broken client from holding the server: none of them applies
// to a response stream, so a slow but alive LLM stream is never cut.
type serverLimits struct {
	SpillDir      string        // spill directory; env ORCHARD_SPILL_DIR; default DATA/spill
	HeaderTimeout time.Duration // time to send request headers; default 30s
	BodyTimeout   time.Duration // time to send a recorded call's request body; default 5m
	ConnIdle      time.Duration // keep-alive connection idle limit; default 2m
	MaxConns      int           // concurrent client connections; default 4096
}

func (l *serverLimits) register(fs *pflag.FlagSet) {
	fs.StringVar(&l.SpillDir, "spill-dir", "",
		"directory of the local spill file, locked by one proxy at a time (default: DATA/spill, inside --data, also with --redis)")
	fs.DurationVar(&l.HeaderTimeout, "header-timeout", 30*time.Second, "close a connection whose request headers take longer than this")
	fs.DurationVar(&l.BodyTimeout, "body-timeout", 5*time.Minute, "answer 408 to a model call whose request body takes longer than this to arrive (never applies to the response stream)")
	fs.DurationVar(&l.ConnIdle, "conn-idle-timeout", 2*time.Minute, "close a keep-alive connection idle for this long between requests")
	fs.IntVar(&l.MaxConns, "max-conns", 4096, "most client connections served at once; more wait to be accepted")
}

// validate refuses negative limits and gives zero ones (a Config built in
// code) their defaults.
func (l *serverLimits) validate() error {
	if l.HeaderTimeout < 0 || l.BodyTimeout < 0 || l.ConnIdle < 0 || l.MaxConns < 0 {
		return errors.New("--header-timeout, --body-timeout, --conn-idle-timeout and --max-conns must be positive")
	}
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&l.HeaderTimeout, 30*time.Second)
	def(&l.BodyTimeout, 5*time.Minute)
	def(&l.ConnIdle, 2*time.Minute)
	if l.MaxConns == 0 {
		l.MaxConns = 4096
	}
	return nil
}

// spillDir is where the proxy spills: --spill-dir, else inside the data
// directory, for both stores (never the working directory, which replicas
// may share).
func spillDir(cfg *proxyConfig) string {
	if cfg.SpillDir != "" {
		return cfg.SpillDir
	}
	if d, _ := lookupEnv("ORCHARD_SPILL_DIR"); d != "" { // a Config built in code
		return d
	}
	data := cfg.Data
	if data == "" {
		data = "./orchard-data"
	}
	return filepath.Join(data, "spill")
}

// newServer returns the proxy's HTTP server with the limits applied. There
// is no ReadTimeout or WriteTimeout: both would cut long streams (the body
// deadline is set per call by the proxy and lifted once the body is in).
func (l *serverLimits) newServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: l.HeaderTimeout, IdleTimeout: l.ConnIdle}
}

// limitListener accepts at most n connections at once: Accept waits for a
// slot, so excess clients queue in the kernel's backlog.
type limitListener struct {
	net.Listener
	slots chan struct{}
}

func newLimitListener(ln net.Listener, n int) *limitListener {
	return &limitListener{Listener: ln, slots: make(chan struct{}, n)}
}

func (l *limitListener) Accept() (net.Conn, error) {
	l.slots <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.slots }}, nil
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
