package jsonscan

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// BenchmarkValid compares Valid with encoding/json's and gjson's on an
// agent-shaped request (an 8 KB chat history).
func BenchmarkValid(b *testing.B) {
	var msgs []string
	for i := range 24 {
		msgs = append(msgs, fmt.Sprintf(`{"role":"user","content":%q}`, strings.Repeat("some words of a prompt \n", 12)+fmt.Sprint(i)))
	}
	doc := []byte(`{"model":"m","stream":true,"messages":[` + strings.Join(msgs, ",") + `],"tools":[{"type":"function","function":{"name":"bash","parameters":{"type":"object"}}}]}`)
	for _, tc := range []struct {
		name string
		fn   func([]byte) bool
	}{{"jsonscan", Valid}, {"encoding-json", json.Valid}, {"gjson", gjson.ValidBytes}} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			for b.Loop() {
				if !tc.fn(doc) {
					b.Fatal("invalid")
				}
			}
		})
	}
}
