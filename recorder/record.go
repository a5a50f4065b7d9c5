package recorder

import (
	"encoding/json"
	"time"
)

// CallSchema is the value of [Call.Schema] for records of this version.
const CallSchema = "orchard.call/v1"

// Unattributed is the episode id of calls that named no episode.
const Unattributed = "unattributed"

// APIs recorded in [Call.API].
const (
	APIChatCompletions API = "chat.completions"
	APICompletions     API = "completions"
	APIResponses       API = "responses"
	APIMessages        API = "messages"
	APICountTokens     API = "messages.count_tokens"
	APIEmbeddings      API = "embeddings"
	APIModels          API = "models"
)

// EncodingBase64 is the value of [Call.RequestEncoding] and
// [Call.ResponseEncoding] for bodies kept as base64.
const EncodingBase64 = "base64"

// End reasons recorded in [Call.EndReason].
const (
	EndDone          EndReason = "done"           // the response ended normally (terminal event seen, or a complete non-streaming body)
	EndEOF           EndReason = "eof"            // the upstream closed a stream without its terminal event
	EndClientGone    EndReason = "client_gone"    // the client went away; the upstream request was cancelled
	EndUpstreamError EndReason = "upstream_error" // the upstream connection failed or was reset
	EndIdleTimeout   EndReason = "idle_timeout"   // no bytes from the upstream for the idle timeout
)

// Call is one recorded model call: the orchard.call/v1 record documented in
// docs/record-format.md. Request and Response hold JSON documents; a request
// body that was not valid UTF-8 JSON is kept as a JSON string with RequestRaw
// set, and one that was not even valid UTF-8 as the base64 of its bytes in
// that string, with RequestEncoding "base64" (ResponseEncoding likewise), so
// that every record keeps the bytes exactly and is valid UTF-8 JSON.
type Call struct {
	Schema      string          `json:"schema"`
	EpisodeID   string          `json:"episode_id"`
	Seq         int64           `json:"seq"`
	CallID      string          `json:"call_id"`
	API         API             `json:"api"`
	Method      string          `json:"method"`
	Path        string          `json:"path"`
	Model       string          `json:"model,omitempty"`
	Stream      bool            `json:"stream"`
	StartedAt   time.Time       `json:"started_at"`
	FirstByteAt *time.Time      `json:"first_byte_at,omitempty"`
	EndedAt     time.Time       `json:"ended_at"`
	Status      int             `json:"status"`
	EndReason   EndReason       `json:"end_reason"`
	Error       string          `json:"error,omitempty"`
	Request     json.RawMessage `json:"request,omitempty"`
	RequestRaw  bool            `json:"request_raw,omitempty"`
	// RequestEncoding is "base64" when Request holds the base64 of bytes
	// that were not valid UTF-8; "" otherwise.
	RequestEncoding string          `json:"request_encoding,omitempty"`
	Response        json.RawMessage `json:"response,omitempty"`
	// ResponseEncoding is "base64" when Response holds the base64 of a
	// body that was not valid UTF-8; "" otherwise.
	ResponseEncoding string          `json:"response_encoding,omitempty"`
	Usage            json.RawMessage `json:"usage,omitempty"`
	Upstream         string          `json:"upstream"`
	UpstreamKind     string          `json:"upstream_kind,omitempty"`
	Injected         []string        `json:"injected,omitempty"`
	Harness          string          `json:"harness,omitempty"`
	Tokens           *Tokens         `json:"tokens,omitempty"`
	Lineage          *Lineage        `json:"lineage,omitempty"`

	// Checked says whoever built this call in memory found Request and
	// Response each to be one valid JSON value (or empty), so that a
	// reader of the call (the lineage tracker) need not validate them
	// again. It is not stored: a call read back has it false.
	Checked bool `json:"-"`

	// prep is the episode-independent part of encoding the call, done by
	// [Pipeline.Record] on the caller's goroutine (see prepare).
	prep *prepared
	// held is what heldBytes said when the call entered a pipeline's queue.
	held int64
}

// heldBytes estimates the memory c holds: its bodies, token arrays and
// prepared metadata, and a fixed allowance for the rest.
func (c *Call) heldBytes() int64 {
	n := 1024 + len(c.Request) + len(c.Response) + len(c.Usage) + len(c.Error)
	if t := c.Tokens; t != nil {
		n += 4 * (len(t.PromptIDs) + len(t.CompletionIDs) + len(t.Logprobs))
		for _, ch := range t.Choices {
			n += 4 * (len(ch.CompletionIDs) + len(ch.Logprobs))
		}
	}
	if c.prep != nil {
		// Its prompt is Tokens.PromptIDs and its cuts are slices of the
		// bodies, but for the layouts of a request and of a small response
		// (a large response's is written from the body, see cutBody).
		n += len(c.prep.req.layout) + len(c.prep.resp.layout)
	}
	return int64(n)
}

// Tokens holds the engine's own token ids for a call, when the upstream
// returned them. CompletionIDs and Logprobs are aligned one-to-one; Logprobs
// is empty when the upstream sent none. Choices holds the same for every
// choice when the call asked for n > 1 (index 0 is repeated in the top level).
type Tokens struct {
	PromptIDs     []int32        `json:"prompt_ids"`
	CompletionIDs []int32        `json:"completion_ids"`
	Logprobs      []float32      `json:"logprobs,omitempty"`
	Choices       []ChoiceTokens `json:"choices,omitempty"`
	Mismatch      string         `json:"mismatch,omitempty"` // set when ids and decoded deltas disagree in count
}

// ChoiceTokens is the completion of one choice of an n > 1 call.
type ChoiceTokens struct {
	Index         int       `json:"index"`
	CompletionIDs []int32   `json:"completion_ids"`
	Logprobs      []float32 `json:"logprobs,omitempty"`
}

// Lineage classifies how a call relates to the earlier calls of its episode.
type Lineage struct {
	ParentCallID       string      `json:"parent_call_id,omitempty"`
	Kind               LineageKind `json:"kind"`
	CommonPrefixTokens int         `json:"common_prefix_tokens,omitempty"`
	CommonPrefixMsgs   int         `json:"common_prefix_messages,omitempty"`
	Thread             int         `json:"thread"`
}

// Lineage kinds recorded in [Lineage.Kind].
const (
	LineageRoot            LineageKind = "root"             // first call of an episode
	LineageExtend          LineageKind = "extend"           // exact token continuation of the parent
	LineageRetokenized     LineageKind = "retokenized"      // same messages, different ids at the boundary
	LineageTemplateRewrite LineageKind = "template_rewrite" // earlier turns re-rendered differently
	LineageEdited          LineageKind = "edited"           // history changed by the harness
	LineageCompacted       LineageKind = "compacted"        // history replaced by a summary
	LineageFork            LineageKind = "fork"             // a new thread (subagent or parallel branch)
	LineageRetry           LineageKind = "retry"            // same prompt as an earlier call
)

// Episode is the stored state of an episode: what created it, how it ended.
type Episode struct {
	ID         string          `json:"id"`
	TaskID     string          `json:"task_id,omitempty"`
	GroupID    string          `json:"group_id,omitempty"`
	Metadata   json.RawMessage `json:"metadata,omitempty"`
	CreatedAt  time.Time       `json:"created_at"`
	Status     string          `json:"status"` // "running" until finished, then success|failure|error|timeout
	Reward     *float64        `json:"reward,omitempty"`
	Info       json.RawMessage `json:"info,omitempty"`
	FinishedAt *time.Time      `json:"finished_at,omitempty"`
}

// Finished reports whether e has ended: a status other than running (an
// empty status is running, as stores write it).
func (e Episode) Finished() bool { return e.Status != "" && e.Status != StatusRunning }

// Episode statuses.
const (
	StatusRunning = "running"
	StatusSuccess = "success"
	StatusFailure = "failure"
	StatusError   = "error"
	StatusTimeout = "timeout"
)

// Event is one piece of environment feedback posted to an episode.
type Event struct {
	EpisodeID string          `json:"episode_id"`
	Seq       int64           `json:"seq"`
	Type      string          `json:"type"`
	At        time.Time       `json:"at"`
	Data      json.RawMessage `json:"data"`
}

// EpisodeSummary is a line of an episode listing.
type EpisodeSummary struct {
	Episode
	Calls       int        `json:"calls"`
	FirstCallAt *time.Time `json:"first_call_at,omitempty"`
	LastCallAt  *time.Time `json:"last_call_at,omitempty"`
}
