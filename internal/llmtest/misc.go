package llmtest

import (
	"hash/fnv"
	"net/http"
	"slices"
	"strconv"

	"github.com/tidwall/gjson"
)

func itoa(i int) string { return strconv.Itoa(i) }

// errorTypes maps a status to the error type each family reports.
var errorTypes = map[int][2]string{ // {openai, anthropic}
	400: {"invalid_request_error", "invalid_request_error"},
	401: {"invalid_request_error", "authentication_error"},
	403: {"invalid_request_error", "permission_error"},
	404: {"invalid_request_error", "not_found_error"},
	413: {"invalid_request_error", "request_too_large"},
	429: {"rate_limit_error", "rate_limit_error"},
	500: {"server_error", "api_error"},
	529: {"server_error", "overloaded_error"},
}

// writeError writes an error in the format of the API family: OpenAI's
// {"error":{"message","type","param","code"}} or Anthropic's
// {"type":"error","error":{"type","message"},"request_id"}.
func writeError(w http.ResponseWriter, api string, status int, msg string) {
	types, ok := errorTypes[status]
	if !ok {
		types = [2]string{"server_error", "api_error"}
		if status < 500 {
			types = [2]string{"invalid_request_error", "invalid_request_error"}
		}
	}
	var body obj
	if api == apiMessages {
		body = obj{{"type", "error"}, {"error", obj{{"type", types[1]}, {"message", msg}}},
			{"request_id", "req_llmtest"}}
	} else {
		body = obj{{"error", obj{{"message", msg}, {"type", types[0]}, {"param", null}, {"code", null}}}}
	}
	b := marshal(body)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func writeJSON(w http.ResponseWriter, v any) {
	b := marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", itoa(len(b)))
	_, _ = w.Write(b)
}

// models lists the scripts as models.
func (h *Handler) models(w http.ResponseWriter, r *http.Request) {
	_, _, _ = h.record(r)
	names := make([]string, 0, len(h.scripts))
	for n := range h.scripts {
		names = append(names, n)
	}
	slices.Sort(names)
	data := make([]obj, len(names))
	for i, n := range names {
		data[i] = h.modelCard(n)
	}
	if h.server == ServerAnthropic {
		first, last := any(null), any(null)
		if len(names) > 0 {
			first, last = names[0], names[len(names)-1]
		}
		writeJSON(w, obj{{"data", data}, {"has_more", false}, {"first_id", first}, {"last_id", last}})
		return
	}
	writeJSON(w, obj{{"object", "list"}, {"data", data}})
}

// modelCard is one model of the listing, as Options.Server writes it
// (vLLM's and SGLang's ModelCard default owned_by to their own names).
func (h *Handler) modelCard(name string) obj {
	switch h.server {
	case ServerAnthropic:
		return obj{{"type", "model"}, {"id", name}, {"display_name", name}, {"created_at", "2026-01-01T00:00:00Z"}}
	case ProfileVLLM, ProfileSGLang:
		return obj{{"id", name}, {"object", "model"}, {"created", 1767225600}, {"owned_by", h.server},
			{"root", name}, {"parent", null}, {"max_model_len", 32768}}
	case ProfileOpenAI:
		return obj{{"id", name}, {"object", "model"}, {"created", 1767225600}, {"owned_by", "system"}}
	}
	return obj{{"id", name}, {"object", "model"}, {"created", 1767225600}, {"owned_by", "llmtest"}}
}

// countTokens answers Anthropic's count_tokens with the script's prompt
// length for the turn the request would get.
func (h *Handler) countTokens(w http.ResponseWriter, r *http.Request) {
	rec, body, err := h.record(r)
	if err != nil || !gjson.ValidBytes(body) {
		writeError(w, apiMessages, http.StatusBadRequest, "request body is not valid JSON")
		return
	}
	req := gjson.ParseBytes(body)
	s, k, err := h.pick(r, apiMessages, req)
	if err != nil {
		writeError(w, apiMessages, http.StatusNotFound, err.Error())
		return
	}
	h.setRec(rec, func(x *Request) { x.Script, x.Turn = s.Name, k })
	writeJSON(w, obj{{"input_tokens", len(s.Turns[k].promptIDs(k))}})
}

// embeddings returns a deterministic 8-dimensional vector per input string.
func (h *Handler) embeddings(w http.ResponseWriter, r *http.Request) {
	_, body, err := h.record(r)
	if err != nil || !gjson.ValidBytes(body) {
		writeError(w, apiChat, http.StatusBadRequest, "request body is not valid JSON")
		return
	}
	req := gjson.ParseBytes(body)
	var inputs []string
	if in := req.Get("input"); in.IsArray() {
		in.ForEach(func(_, v gjson.Result) bool { inputs = append(inputs, v.Raw); return true })
	} else {
		inputs = []string{in.Raw}
	}
	data := make([]obj, len(inputs))
	tokens := 0
	for i, in := range inputs {
		hs := fnv.New64a()
		hs.Write([]byte(in))
		seed := hs.Sum64()
		vec := make([]float64, 8)
		for j := range vec {
			vec[j] = float64(int64(seed>>(8*j))&0xff-128) / 128
		}
		data[i] = obj{{"object", "embedding"}, {"embedding", vec}, {"index", i}}
		tokens += len(in)/4 + 1
	}
	writeJSON(w, obj{{"object", "list"}, {"data", data}, {"model", req.Get("model").String()},
		{"usage", obj{{"prompt_tokens", tokens}, {"total_tokens", tokens}}}})
}
