package loadgen

import (
	"encoding/json"
	"fmt"
	"time"
)

// maxModelLen is the context length the benchmark's model reports.
const maxModelLen = 32768

// modelCard is one entry of GET /v1/models in vLLM's shape (its ModelCard:
// the OpenAI model object plus root, parent, max_model_len and a
// permission list), in vLLM's field order.
type modelCard struct {
	ID          string            `json:"id"`
	Object      string            `json:"object"`
	Created     int64             `json:"created"`
	OwnedBy     string            `json:"owned_by"`
	Root        string            `json:"root"`
	Parent      *string           `json:"parent"`
	MaxModelLen int               `json:"max_model_len"`
	Permission  []modelPermission `json:"permission"`
}

// modelPermission is vLLM's ModelPermission with its defaults.
type modelPermission struct {
	ID                 string  `json:"id"`
	Object             string  `json:"object"`
	Created            int64   `json:"created"`
	AllowCreateEngine  bool    `json:"allow_create_engine"`
	AllowSampling      bool    `json:"allow_sampling"`
	AllowLogprobs      bool    `json:"allow_logprobs"`
	AllowSearchIndices bool    `json:"allow_search_indices"`
	AllowView          bool    `json:"allow_view"`
	AllowFineTuning    bool    `json:"allow_fine_tuning"`
	Organization       string  `json:"organization"`
	Group              *string `json:"group"`
	IsBlocking         bool    `json:"is_blocking"`
}

// modelList renders the GET /v1/models answer: {"object":"list","data":[…]}
// with the benchmark's one model, served under its own name.
func modelList(now time.Time) []byte {
	perm := modelPermission{ID: fmt.Sprintf("modelperm-bench%x", now.UnixNano()), Object: "model_permission",
		Created: now.Unix(), AllowSampling: true, AllowLogprobs: true, AllowView: true, Organization: "*"}
	card := modelCard{ID: Model, Object: "model", Created: now.Unix(), OwnedBy: "vllm", Root: Model,
		MaxModelLen: maxModelLen, Permission: []modelPermission{perm}}
	b, _ := json.Marshal(struct {
		Object string      `json:"object"`
		Data   []modelCard `json:"data"`
	}{"list", []modelCard{card}}) // plain structs always marshal
	return b
}
