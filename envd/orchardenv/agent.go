package orchardenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/orchard-rl/orchard/envd"
)

// maxAgentAnswer caps what one in-process agent call buffers: a file
// download (sent back base64 in JSON) or an exec result.
const maxAgentAnswer = 64 << 20

// agentCall is one request to a sandbox's agent.
type agentCall struct {
	method, rest string // rest is the agent path below /agent/v1/
	query        url.Values
	ctype        string // body content type; "" with no body
	body         []byte
}

// answer is the agent's buffered reply.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// call sends c to sandbox id's agent through the Manager and returns its
// answer; an error status comes back as the envd error it carries.
func (h *Handler) call(ctx context.Context, id string, c agentCall) (*answer, error) {
	u := url.URL{Scheme: "http", Host: "sandbox", Path: "/" + c.rest, RawQuery: c.query.Encode()}
	req, err := http.NewRequestWithContext(ctx, c.method, u.String(), bytes.NewReader(c.body))
	if err != nil {
		return nil, fmt.Errorf("build agent request: %w", err)
	}
	if c.ctype != "" {
		req.Header.Set("Content-Type", c.ctype)
	}
	bw := &bufferWriter{header: http.Header{}}
	if err := forward(h.opts.Manager, bw, req, id, c.rest); err != nil {
		return nil, err
	}
	if bw.over {
		return nil, envd.Errorf(envd.ErrBadRequest, "answer larger than %d bytes", maxAgentAnswer)
	}
	a := &answer{status: bw.statusCode(), header: bw.header, body: bw.buf.Bytes()}
	if a.status >= 400 {
		return a, envd.DecodeError(a.status, a.body)
	}
	return a, nil
}

// forward runs m.Forward, turning the reverse proxy's abort (a copy that
// failed after the headers) into an error.
func forward(m Sandboxes, w http.ResponseWriter, r *http.Request, id, rest string) (err error) {
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler {
				panic(v)
			}
			err = fmt.Errorf("%w: sandbox agent answer cut off", envd.ErrUpstream)
		}
	}()
	m.Forward(w, r, id, rest)
	return nil
}

// callJSON is call with a JSON body in and a JSON answer decoded into out.
func (h *Handler) callJSON(ctx context.Context, id, rest string, in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("encode agent request: %w", err)
	}
	a, err := h.call(ctx, id, agentCall{method: http.MethodPost, rest: rest, ctype: "application/json", body: b})
	if err != nil {
		return err
	}
	if err := json.Unmarshal(a.body, out); err != nil {
		return fmt.Errorf("%w: decode agent answer: %w", envd.ErrUpstream, err)
	}
	return nil
}

// bufferWriter is the http.ResponseWriter an in-process agent call
// writes into: it keeps the status, the headers and up to maxAgentAnswer
// bytes of body.
type bufferWriter struct {
	header http.Header
	status int
	buf    bytes.Buffer
	over   bool
}

func (w *bufferWriter) Header() http.Header { return w.header }

func (w *bufferWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *bufferWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	if int64(w.buf.Len()+len(p)) > maxAgentAnswer {
		w.over = true
		return 0, errors.New("agent answer too large")
	}
	return w.buf.Write(p)
}

// Flush is a no-op: the body is only read once the call returns.
func (w *bufferWriter) Flush() {}

func (w *bufferWriter) statusCode() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}
