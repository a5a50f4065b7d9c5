package recorder

import "strconv"

// promptIDsKey is the top-level response field in which vLLM's chat API
// sends the prompt's token ids again. A version 2 document stores it as a
// hole that the decoder fills from the call's prompt ids, which are stored
// once, delta-encoded against the base call; before, each response kept
// its whole prompt in its skeleton, O(turns²) bytes over an episode.
const promptIDsKey = "prompt_token_ids"

// appendIDsJSON appends ids as a compact JSON array, the form engines send.
func appendIDsJSON(dst []byte, ids []int32) []byte {
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
