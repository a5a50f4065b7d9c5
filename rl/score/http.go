package score

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// HTTPOptions configures [NewHTTP].
type HTTPOptions struct {
	URL     string        // endpoint that takes the POST; required
	Token   string        // sent as a bearer token when set
	Timeout time.Duration // per candidate; default 30s
	Client  *http.Client  // default a new client
}

// HTTP scores through a value-model server: it POSTs
// {"candidates": [CANDIDATE]} and expects 200 with
// {"scores": [{"episode_id": ID, "value": V, "features": {...}}]}, one
// score for the candidate sent (docs/rl-rollout.md has the schema).
type HTTP struct {
	o HTTPOptions
}

// NewHTTP returns an HTTP scorer.
func NewHTTP(o HTTPOptions) *HTTP {
	o.defaults()
	return &HTTP{o: o}
}

// defaults fills the zero fields of o.
func (o *HTTPOptions) defaults() {
	if o.Timeout == 0 {
		o.Timeout = 30 * time.Second
	}
	if o.Client == nil {
		o.Client = &http.Client{}
	}
}

type httpAnswer struct {
	Scores []struct {
		EpisodeID string             `json:"episode_id"`
		Value     *float64           `json:"value"`
		Features  map[string]float64 `json:"features"`
	} `json:"scores"`
}

// Score posts ep and checks the answer.
func (h *HTTP) Score(ctx context.Context, ep *Episode) (Score, error) {
	body, err := json.Marshal(map[string]any{"candidates": []*Episode{ep}})
	if err != nil {
		return Score{}, fmt.Errorf("candidate %s: encode: %w", ep.ID, err)
	}
	raw, err := post(ctx, h.o.Client, h.o.URL, h.o.Token, h.o.Timeout, body)
	if err != nil {
		return Score{}, fmt.Errorf("candidate %s: scorer %s: %w", ep.ID, h.o.URL, err)
	}
	var a httpAnswer
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return Score{}, fmt.Errorf("candidate %s: %w: answer is not the scores JSON: %v: %.200q", ep.ID, ErrBadScore, err, raw)
	}
	if len(a.Scores) != 1 || a.Scores[0].EpisodeID != ep.ID || a.Scores[0].Value == nil {
		return Score{}, fmt.Errorf("candidate %s: %w: want one score with episode_id %q and a value, got %.200q", ep.ID, ErrBadScore, ep.ID, raw)
	}
	return check(ep, Score{Value: *a.Scores[0].Value, Features: a.Scores[0].Features})
}

// post sends body and returns a 200 answer's body (at most 1 MiB).
func post(ctx context.Context, c *http.Client, url, token string, timeout time.Duration, body []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("read answer: %w", err)
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d: %.200q", res.StatusCode, raw)
	}
	return raw, nil
}
