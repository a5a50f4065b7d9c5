package recorder

import (
	"slices"
	"strconv"

	"github.com/tidwall/gjson"
)

// Where responses send the prompt's token ids again: vLLM's chat API in a
// top-level prompt_token_ids, SGLang in sglext.input_ids. A version 2
// document stores that array as a hole that the decoder fills from the
// call's prompt ids, which are stored once, delta-encoded against the base
// call; before, each response kept its whole prompt in its skeleton,
// O(turns²) bytes over an episode.
const (
	promptIDsKey    = "prompt_token_ids"
	sglextKey       = "sglext"
	sglextPromptKey = "sglext.input_ids"
)

// promptIDsAt looks at the top-level member key: v of a response. For a
// member that holds prompt exactly (the member, or the input_ids inside
// sglext), it returns that value, with its absolute Index, and true;
// otherwise key and v unchanged and false.
func promptIDsAt(key string, v gjson.Result, prompt []int32) (string, gjson.Result, bool) {
	if len(prompt) == 0 {
		return key, v, false
	}
	switch key {
	case promptIDsKey:
		return key, v, isIDsJSON(v.Raw, prompt)
	case sglextKey:
		in := v.Get("input_ids") // Result.Get gives the Index in the whole body
		if in.Exists() && v.IsObject() && isIDsJSON(in.Raw, prompt) {
			return sglextPromptKey, in, true
		}
	}
	return key, v, false
}

// appendIDsJSON appends ids as a compact JSON array, the form engines send.
func appendIDsJSON(dst []byte, ids []int32) []byte {
	dst = slices.Grow(dst, 7*len(ids)+2) // 6-digit ids and commas: one allocation
	dst = append(dst, '[')
	for i, id := range ids {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, int64(id), 10)
	}
	return append(dst, ']')
}

// isIDsJSON reports whether raw is exactly appendIDsJSON(nil, ids), without
// building it: anything else (spaces, another spelling) stays in the
// skeleton as sent.
func isIDsJSON(raw string, ids []int32) bool {
	var num [12]byte
	if len(raw) < 2 || raw[0] != '[' || raw[len(raw)-1] != ']' {
		return false
	}
	rest := raw[1 : len(raw)-1]
	for i, id := range ids {
		if i > 0 {
			if rest == "" || rest[0] != ',' {
				return false
			}
			rest = rest[1:]
		}
		n := strconv.AppendInt(num[:0], int64(id), 10)
		if len(rest) < len(n) || rest[:len(n)] != string(n) {
			return false
		}
		rest = rest[len(n):]
	}
	return rest == ""
}
