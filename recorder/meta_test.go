package recorder

import (
	"reflect"
	"testing"
)

// TestParseOwnMeta holds parseOwnMeta to parseMeta.
func TestParseOwnMeta(t *testing.T) {
	var metas [][]byte
	for _, calls := range [][]*Call{vllmEpisode(3), growingEpisode(3, 100)} {
		for _, c := range calls {
			m, err := marshalMeta(c)
			if err != nil {
				t.Fatal(err)
			}
			metas = append(metas, m)
		}
	}
	for _, s := range []string{`{}`, ` { } `, `{"a":1,"b":"x\"y","c":[1,{"d":"}"}],"e":null}`, `{"a":1,"a":2}`,
		`{"a\u0062":1}`, `{"a":1 "b":2}`, `{"a":1}x`, `[1]`, `{"a":}`, `{"a":1,}`} {
		metas = append(metas, []byte(s))
	}
	for _, meta := range metas {
		got, gerr := parseOwnMeta(meta)
		want, werr := parseMeta(meta)
		if (gerr == nil) != (werr == nil) || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: parseOwnMeta %v %v, parseMeta %v %v", meta, got, gerr, want, werr)
		}
	}
}
