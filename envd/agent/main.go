package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Config is the command-line configuration of the agent process.
type Config struct {
	// Listen is "host:port" or "unix:/path"; default ":7070". Ignored
	// when ListenFD is set.
	Listen string
	// ListenFD is an inherited listening socket (the local backend hands
	// one in as fd 3); 0 means none.
	ListenFD int
	// Workdir is the default cwd; default the current directory.
	Workdir string
	// TokenEnv names the env variable holding the bearer token clients
	// must send; default ORCHARD_AGENT_TOKEN. The variable is removed from
	// the environment commands see.
	TokenEnv string
	// Install, when set, copies this executable to the path and exits
	// (the Kubernetes init container does this).
	Install string
	// DefaultTimeout of execs; default 10 minutes.
	DefaultTimeout time.Duration
	// Entrypoint is started beside the agent and left running; empty
	// means none.
	Entrypoint []string
	// EgressListen and EgressSocket, both set, make the agent forward
	// TCP connections on the loopback address EgressListen to the Unix
	// socket EgressSocket (envd's gate in network mode proxy).
	EgressListen, EgressSocket string
	// Init makes the process a minimal init that runs the agent as its
	// child and reaps orphans (see [RunInit]), as it does anyway when it
	// is PID 1.
	Init bool
}

// Run serves the agent until ctx is done, then kills every running exec.
// lookupEnv reads the process environment (os.LookupEnv in production).
func Run(ctx context.Context, c Config, lookupEnv func(string) (string, bool), logger *slog.Logger) error {
	if c.Install != "" {
		return install(c.Install)
	}
	ln, err := listen(c)
	if err != nil {
		return err
	}
	token, _ := lookupEnv(c.TokenEnv)
	srv := New(Options{Workdir: c.Workdir, BaseEnv: baseEnv(c.TokenEnv), Token: token, DefaultTimeout: c.DefaultTimeout, Logger: logger})
	defer srv.Close()
	if c.EgressListen != "" && c.EgressSocket != "" {
		br, err := startBridge(c.EgressListen, c.EgressSocket)
		if err != nil {
			ln.Close()
			return err
		}
		defer br.Close()
	}
	if len(c.Entrypoint) > 0 {
		stop, err := startEntrypoint(c.Entrypoint, logger)
		if err != nil {
			ln.Close()
			return err
		}
		defer stop()
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 30 * time.Second, Protocols: new(http.Protocols)}
	hs.Protocols.SetHTTP1(true)
	hs.Protocols.SetUnencryptedHTTP2(true)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve agent: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve agent: %w", err)
	}
	return nil
}

func listen(c Config) (net.Listener, error) {
	if c.ListenFD > 0 {
		f := os.NewFile(uintptr(c.ListenFD), "listener")
		ln, err := net.FileListener(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("listen on inherited fd %d: %w", c.ListenFD, err)
		}
		return ln, nil
	}
	network, addr := "tcp", c.Listen
	if p, ok := strings.CutPrefix(addr, "unix:"); ok {
		network, addr = "unix", p
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s on %s: %w", network, addr, err)
	}
	return ln, nil
}

// baseEnv is the agent's environment without its own secrets and knobs.
func baseEnv(tokenEnv string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == tokenEnv || strings.HasPrefix(k, "ORCHARD_AGENT_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// install copies the running executable to dst with mode 0755.
func install(dst string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable: %w", err)
	}
	in, err := os.Open(self)
	if err != nil {
		return fmt.Errorf("open own executable: %w", err)
	}
	defer in.Close()
	if _, err := writeFileAtomic(dst, in, 0o755); err != nil {
		return fmt.Errorf("install agent to %s: %w", dst, err)
	}
	return nil
}

// startEntrypoint starts the image's own command in its own process group,
// with the agent's stdout and stderr; stop kills it and waits.
func startEntrypoint(argv []string, logger *slog.Logger) (stop func(), err error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start entrypoint %s: %w", argv[0], err)
	}
	done := make(chan struct{})
	go func() {
		err := cmd.Wait()
		logger.Info("entrypoint exited", "cmd", argv[0], "err", err)
		close(done)
	}()
	return func() {
		killTree(cmd.Process.Pid)
		<-done
	}, nil
}
