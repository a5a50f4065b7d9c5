package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/orchard-rl/orchard/envd"
)

// Options configures a [Client].
type Options struct {
	// BaseURL of envd, e.g. "http://127.0.0.1:7000". Required.
	BaseURL string
	// Token is sent as "Authorization: Bearer <Token>" when set.
	Token string
	// HTTP is the client used; nil means one without a total timeout
	// (streams and long execs run for minutes).
	HTTP *http.Client
	// Retries is how many times a failed connection is retried; default 4.
	Retries int
	// StreamIdle is the read timeout of streams: a stream with no event
	// (envd sends keepalives every 15 s) for this long fails; default 60 s.
	StreamIdle time.Duration
}

// Client talks to one envd. It is safe for concurrent use.
type Client struct{ opts Options }

// New returns a client for opts.BaseURL.
func New(opts Options) *Client {
	opts.defaults()
	return &Client{opts: opts}
}

// defaults fills the zero fields of o and trims BaseURL's trailing slashes.
func (o *Options) defaults() {
	o.BaseURL = strings.TrimRight(o.BaseURL, "/")
	if o.HTTP == nil {
		o.HTTP = &http.Client{}
	}
	if o.Retries <= 0 {
		o.Retries = 4
	}
	if o.StreamIdle <= 0 {
		o.StreamIdle = 60 * time.Second
	}
}

// Create starts a sandbox. The caller must Close (or Finish) it.
func (c *Client) Create(ctx context.Context, spec envd.Spec) (*Sandbox, error) {
	var info envd.Sandbox
	if err := c.doJSON(ctx, http.MethodPost, "/envd/v1/sandboxes", spec, &info); err != nil {
		return nil, fmt.Errorf("create sandbox: %w", err)
	}
	return &Sandbox{Info: info, c: c}, nil
}

// Sandbox returns a handle on an existing sandbox id.
func (c *Client) Sandbox(id string) *Sandbox { return &Sandbox{Info: envd.Sandbox{ID: id}, c: c} }

// List returns the live sandboxes.
func (c *Client) List(ctx context.Context) ([]envd.Sandbox, error) {
	var out struct {
		Sandboxes []envd.Sandbox `json:"sandboxes"`
	}
	if err := c.doJSON(ctx, http.MethodGet, "/envd/v1/sandboxes", nil, &out); err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	return out.Sandboxes, nil
}

// request is one HTTP call: a replayable body and the content type.
type request struct {
	method, path, ctype string
	body                []byte
	accept              string
}

// do sends rq, retrying connection failures, and returns a response with
// status < 400; error statuses become *envd.Error.
func (c *Client) do(ctx context.Context, rq request) (*http.Response, error) {
	var lastErr error
	for attempt := 0; attempt <= c.opts.Retries; attempt++ {
		if attempt > 0 {
			t := time.NewTimer(time.Duration(25<<attempt) * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, errors.Join(lastErr, ctx.Err())
			case <-t.C:
			}
		}
		res, err := c.send(ctx, rq)
		if err == nil {
			return res, nil
		}
		lastErr = err
		if !retryable(rq.method, err) || ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

func (c *Client) send(ctx context.Context, rq request) (*http.Response, error) {
	var body io.Reader
	if rq.body != nil {
		body = bytes.NewReader(rq.body)
	}
	req, err := http.NewRequestWithContext(ctx, rq.method, c.opts.BaseURL+rq.path, body)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	if rq.ctype != "" {
		req.Header.Set("Content-Type", rq.ctype)
	}
	if rq.accept != "" {
		req.Header.Set("Accept", rq.accept)
	}
	if c.opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.opts.Token)
	}
	res, err := c.opts.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	if res.StatusCode >= 400 {
		defer res.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		return nil, envd.DecodeError(res.StatusCode, b)
	}
	return res, nil
}

// retryable reports whether err is a connection failure worth retrying:
// any method when the request never left (dial failed), idempotent
// methods also when the connection broke.
func retryable(method string, err error) bool {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		return true
	}
	if method == http.MethodPost {
		return false
	}
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.EPIPE)
}

// doJSON sends in (when non-nil) as JSON and decodes the answer into out
// (when non-nil).
func (c *Client) doJSON(ctx context.Context, method, path string, in, out any) error {
	rq := request{method: method, path: path}
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		rq.body, rq.ctype = b, "application/json"
	}
	res, err := c.do(ctx, rq)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, res.Body)
		return nil
	}
	if err := json.NewDecoder(res.Body).Decode(out); err != nil {
		return fmt.Errorf("decode answer: %w", err)
	}
	return nil
}
