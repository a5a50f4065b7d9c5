package rollout

import (
	"context"
	"io"
	"time"

	"github.com/orchard-rl/orchard/envd"
	"github.com/orchard-rl/orchard/envd/client"
)

// Envd creates sandboxes; *client.Client is one.
type Envd interface {
	Create(ctx context.Context, spec envd.Spec) (*client.Sandbox, error)
}

// Options configure a Runner.
type Options struct {
	Envd    Envd     // where sandboxes are created (required)
	Harness []string // harness argv; "{prompt}" and "{task_id}" are replaced per task (required)
	Output  io.Writer

	Image           string            // sandbox image ("" is the backend's default)
	Workdir         string            // the task directory is copied here
	Network         string            // proxy, none or host
	Env             map[string]string // added to the harness and verifier env
	Timeout         time.Duration     // harness time limit
	VerifierTimeout time.Duration     // verifier time limit
	Verifier        string            // shell command; a task's own verifier wins
	NoEpisode       bool              // open no episode (no proxy wiring)

	N           int // samples (episodes) per task in Rollout
	Concurrency int // sandboxes running at once in Rollout
}

// Defaults returns the default options: the one place they are set.
func Defaults() Options {
	return Options{
		Output:          io.Discard,
		Workdir:         "/work",
		Network:         "proxy",
		Timeout:         30 * time.Minute,
		VerifierTimeout: 10 * time.Minute,
		N:               8,
		Concurrency:     64,
	}
}

// defaults fills the zero fields that mean nothing on their own.
func (o *Options) defaults() {
	d := Defaults()
	if o.Output == nil {
		o.Output = d.Output
	}
	if o.Workdir == "" {
		o.Workdir = d.Workdir
	}
	if o.Network == "" {
		o.Network = d.Network
	}
	if o.N < 1 {
		o.N = d.N
	}
	if o.Concurrency < 1 {
		o.Concurrency = d.Concurrency
	}
}

// Runner runs episodes and rollouts with one set of options.
type Runner struct{ o Options }

// New returns a Runner; zero fields of o take their defaults.
func New(o Options) *Runner {
	o.defaults()
	return &Runner{o: o}
}
