package llmtest

import (
	"net/http"
	"strconv"

	"github.com/tidwall/gjson"
)

// API families, which also pick the error body format.
const (
	apiChat        = "chat"
	apiCompletions = "completions"
	apiResponses   = "responses"
	apiMessages    = "messages"
)

// call is one generation request being answered.
type call struct {
	api     string
	s       *Script
	k       int // turn index
	t       *Turn
	req     gjson.Result
	model   string
	created int64
	stream  bool
	n       int

	includeUsage bool // chat/completions stream_options.include_usage
	tokenIDs     bool // vLLM/SGLang return_token_ids
	logprobs     bool // chat logprobs / completions logprobs >= 0
	topLogprobs  int  // chat top_logprobs / completions logprobs
	encrypted    bool // responses include reasoning.encrypted_content
	opt          options
}

// generate returns the handler of one generation API.
func (h *Handler) generate(api string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		rec, body, err := h.record(r)
		if err != nil {
			writeError(w, api, http.StatusBadRequest, err.Error())
			return
		}
		if !gjson.ValidBytes(body) || !gjson.ParseBytes(body).IsObject() {
			writeError(w, api, http.StatusBadRequest, "request body is not a JSON object")
			return
		}
		req := gjson.ParseBytes(body)
		s, k, err := h.pick(r, api, req)
		if err != nil {
			writeError(w, api, http.StatusNotFound, err.Error())
			return
		}
		h.setRec(rec, func(x *Request) { x.Script, x.Turn = s.Name, k })
		spec := s.Fault
		if v := r.Header.Get(HeaderFault); v != "" {
			spec = v
		}
		f, err := parseFault(spec)
		if err != nil {
			writeError(w, api, http.StatusBadRequest, err.Error())
			return
		}
		c := newCall(api, s, k, req)
		if msg := c.refusal(); msg != "" {
			writeError(w, api, http.StatusBadRequest, msg)
			return
		}
		h.answer(w, r, rec, c, f)
	}
}

func newCall(api string, s *Script, k int, req gjson.Result) *call {
	c := &call{api: api, s: s, k: k, t: &s.Turns[k], req: req,
		model: s.Model, created: s.Created, stream: req.Get("stream").Bool(), n: 1}
	if c.model == "" {
		c.model = req.Get("model").String()
	}
	if c.created == 0 {
		c.created = 1767225600
	}
	if n := req.Get("n").Int(); n > 1 && api != apiResponses && api != apiMessages {
		c.n = int(n)
	}
	c.includeUsage = req.Get("stream_options.include_usage").Bool()
	c.tokenIDs = req.Get("return_token_ids").Bool() && c.profile() != ProfileOpenAI
	switch api {
	case apiChat:
		c.logprobs = req.Get("logprobs").Bool()
		c.topLogprobs = int(req.Get("top_logprobs").Int())
	case apiCompletions:
		if lp := req.Get("logprobs"); lp.Exists() && lp.Type == gjson.Number {
			c.logprobs, c.topLogprobs = true, int(lp.Int())
		}
	case apiResponses:
		req.Get("include").ForEach(func(_, v gjson.Result) bool {
			c.encrypted = c.encrypted || v.String() == "reasoning.encrypted_content"
			return true
		})
	}
	c.readOptions(req)
	return c
}

func (c *call) profile() string {
	if c.s.Profile == "" {
		return ProfileVLLM
	}
	return c.s.Profile
}

// id is the response id with the API's prefix, fixed per script and turn.
func (c *call) id(prefix string) string {
	return prefix + "llmtest-" + c.s.Name + "-" + strconv.Itoa(c.k)
}

// answer writes the response, honouring the fault.
func (h *Handler) answer(w http.ResponseWriter, r *http.Request, rec *Request, c *call, f fault) {
	ctx := r.Context()
	if !wait(ctx, h.done, f.firstByteDelay) {
		if ctx.Err() != nil {
			h.canceled(rec)
		}
		return
	}
	if f.status != 0 {
		writeError(w, c.api, f.status, "llmtest fault: status "+strconv.Itoa(f.status))
		return
	}
	if !c.stream {
		h.answerJSON(w, r, rec, c, f)
		return
	}
	s := &stream{w: w, rc: http.NewResponseController(w), ctx: ctx, h: h, rec: rec, f: f}
	s.start()
	switch c.api {
	case apiChat:
		c.chatStream(s)
	case apiCompletions:
		c.completionsStream(s)
	case apiResponses:
		c.responsesStream(s)
	case apiMessages:
		c.messagesStream(s)
	}
}

// answerJSON writes a non-streaming response.
func (h *Handler) answerJSON(w http.ResponseWriter, r *http.Request, rec *Request, c *call, f fault) {
	var v any
	switch c.api {
	case apiChat:
		v = c.chatJSON()
	case apiCompletions:
		v = c.completionsJSON()
	case apiResponses:
		v = c.responseObject("completed", true)
	case apiMessages:
		v = c.messageJSON()
	}
	body := marshal(v)
	if f.hangAfter >= 0 {
		s := &stream{ctx: r.Context(), h: h, rec: rec}
		s.hang()
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	if f.resetAfter >= 0 || f.eofAfter >= 0 {
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body[:len(body)/2])
		_ = http.NewResponseController(w).Flush()
		reset(w)
		return
	}
	_, _ = w.Write(body)
}

// usage numbers of a call: prompt tokens, completion tokens (all choices) and
// reasoning tokens.
func (c *call) usage() (prompt, completion, reasoning int) {
	prompt = len(c.t.promptIDs(c.k))
	for i := range c.n {
		for _, tk := range c.t.choice(i).tokens(i) {
			completion++
			if tk.kind == kindReasoning {
				reasoning++
			}
		}
	}
	return prompt, completion, reasoning
}
