package recorder

import (
	"slices"

	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/internal/jsonout"
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
	// 6-digit ids and commas: one allocation
	return jsonout.Int32s(slices.Grow(dst, 7*len(ids)+2), ids)
}

// isIDsJSON reports whether raw is exactly appendIDsJSON(nil, ids), without
// building it: anything else (spaces, another spelling) stays in the
// skeleton as sent. It reads each number's digits and compares values
// rather than formatting every id: formatting and comparing was a third of
// encoding a vLLM call.
func isIDsJSON(raw string, ids []int32) bool {
	return idsEnd(raw, 0, ids) == len(raw)
}

// idsEnd returns the end of appendIDsJSON(nil, ids) if s holds it at i,
// else -1.
func idsEnd[S ~string | ~[]byte](s S, i int, ids []int32) int {
	if i >= len(s) || s[i] != '[' {
		return -1
	}
	i++
	for k, id := range ids {
		if k > 0 {
			if i >= len(s) || s[i] != ',' {
				return -1
			}
			i++
		}
		want := uint64(id)
		if id < 0 {
			if i >= len(s) || s[i] != '-' {
				return -1
			}
			i++
			want = uint64(-int64(id))
		}
		j := i
		var got uint64
		for ; j < len(s); j++ {
			d := s[j] - '0'
			if d > 9 {
				break
			}
			got = got*10 + uint64(d)
		}
		// The canonical spelling: 1 to 10 digits (int32), no leading zero.
		if n := j - i; n == 0 || n > 10 || got != want || (n > 1 && s[i] == '0') {
			return -1
		}
		i = j
	}
	if i >= len(s) || s[i] != ']' {
		return -1
	}
	return i + 1
}
