package envd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Episode is what the proxy returns when it opens an episode: its id, its
// scoped token and the env block that routes an unmodified harness
// through the proxy (OPENAI_BASE_URL, OPENAI_API_KEY, ANTHROPIC_BASE_URL,
// ANTHROPIC_API_KEY).
type Episode struct {
	ID    string            `json:"id"`
	Token string            `json:"token"`
	Env   map[string]string `json:"env"`
}

// EpisodeClient talks to the proxy's episode API (/orchard/v1/episodes).
// It is safe for concurrent use.
type EpisodeClient struct {
	base  string
	token string
	http  *http.Client
}

// NewEpisodeClient returns a client for the proxy at baseURL; adminToken,
// when set, is sent as a bearer token. A nil hc means a client with a 30 s
// timeout.
func NewEpisodeClient(baseURL, adminToken string, hc *http.Client) *EpisodeClient {
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	return &EpisodeClient{base: strings.TrimRight(baseURL, "/"), token: adminToken, http: hc}
}

// Create opens an episode for spec.
func (c *EpisodeClient) Create(ctx context.Context, spec EpisodeSpec) (*Episode, error) {
	var ep Episode
	if err := c.post(ctx, "/orchard/v1/episodes", spec, http.StatusCreated, &ep); err != nil {
		return nil, fmt.Errorf("create episode: %w", err)
	}
	if ep.ID == "" {
		return nil, fmt.Errorf("create episode: %w: proxy answered without an id", ErrUpstream)
	}
	return &ep, nil
}

// Finish records the outcome of episode id and returns the proxy's
// episode JSON.
func (c *EpisodeClient) Finish(ctx context.Context, id string, o Outcome) (json.RawMessage, error) {
	var out json.RawMessage
	if err := c.post(ctx, "/orchard/v1/episodes/"+id+"/finish", o, http.StatusOK, &out); err != nil {
		return nil, fmt.Errorf("finish episode %s: %w", id, err)
	}
	return out, nil
}

// Event appends an environment event (a JSON object with a "type") to
// episode id.
func (c *EpisodeClient) Event(ctx context.Context, id string, ev map[string]any) error {
	if err := c.post(ctx, "/orchard/v1/episodes/"+id+"/events", ev, http.StatusCreated, nil); err != nil {
		return fmt.Errorf("post episode %s event: %w", id, err)
	}
	return nil
}

// post sends body as JSON and decodes a response with status want into
// out (when non-nil). Other statuses become errors wrapping ErrUpstream,
// or ErrBadRequest for 4xx answers the caller caused.
func (c *EpisodeClient) post(ctx context.Context, path string, body any, want int, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encode request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUpstream, err)
	}
	defer res.Body.Close()
	rb, err := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("%w: read answer: %w", ErrUpstream, err)
	}
	if res.StatusCode != want && (res.StatusCode < 200 || res.StatusCode > 299) {
		kind := ErrUpstream
		if res.StatusCode == http.StatusBadRequest || res.StatusCode == http.StatusNotFound || res.StatusCode == http.StatusConflict {
			kind = ErrBadRequest
		}
		return fmt.Errorf("%w: proxy %s: %w", kind, path, DecodeError(res.StatusCode, rb))
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(rb, out); err != nil {
		return fmt.Errorf("%w: decode answer: %w", ErrUpstream, err)
	}
	return nil
}
