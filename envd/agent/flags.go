package agent

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"
)

// ErrHelp is returned by [ParseArgs] for --help or -h; print [FlagUsages].
var ErrHelp = pflag.ErrHelp

// newFlagSet returns the agent's flags, bound to c. They use the same
// library and syntax (--kebab-case) as every orchard command, but have no
// environment variables: the agent's environment is the sandbox image's,
// which must not configure it, so envd passes everything as flags.
func newFlagSet(c *Config) *pflag.FlagSet {
	fs := pflag.NewFlagSet("sandbox-agent", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SetInterspersed(false) // the first non-flag starts the entrypoint
	fs.StringVar(&c.Listen, "listen", ":7070", `address to serve on: "host:port" or "unix:/path"`)
	fs.IntVar(&c.ListenFD, "listen-fd", 0, "serve on this inherited listening socket instead")
	fs.StringVar(&c.Workdir, "workdir", "", "default working directory of commands (default: current directory)")
	fs.StringVar(&c.TokenEnv, "token-env", "ORCHARD_AGENT_TOKEN", "env variable with the bearer token clients must send")
	fs.StringVar(&c.Install, "install", "", "copy this binary to the given path and exit")
	fs.DurationVar(&c.DefaultTimeout, "default-timeout", 10*time.Minute, "timeout of commands that give none")
	fs.StringVar(&c.EgressListen, "egress-listen", "", "forward TCP connections on this address to --egress-socket")
	fs.StringVar(&c.EgressSocket, "egress-socket", "", "the Unix socket --egress-listen forwards to")
	fs.BoolVar(&c.Init, "init", false, "run as a reaping init with the agent as its child (automatic when PID 1)")
	return fs
}

// ParseArgs reads the agent's flags; the arguments after "--", or from
// the first one that is not a flag, are the entrypoint.
func ParseArgs(args []string) (Config, error) {
	var c Config
	fs := newFlagSet(&c)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return c, ErrHelp
		}
		return c, fmt.Errorf("sandbox-agent flags: %w", err)
	}
	c.Entrypoint = fs.Args()
	return c, nil
}

// FlagUsages returns the help text of the agent's flags.
func FlagUsages() string {
	var c Config
	return newFlagSet(&c).FlagUsages()
}
