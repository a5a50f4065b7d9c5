package jsonout

import (
	"encoding/json"
	"testing"
)

// FuzzString holds String to encoding/json, for strings and byte slices,
// invalid UTF-8 and escapes included.
func FuzzString(f *testing.F) {
	for _, s := range []string{"", "plain", "a\"b\\c", "\b\f\n\r\t\x00\x1f\x7f", "<a href='x'>&amp;</a>",
		"café 日本 \u2028\u2029 😀", "\xff\xfe bad \xe2\x80", "\xed\xa0\x80 surrogate"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := String([]byte("x"), s); string(got) != "x"+string(want) {
			t.Fatalf("%q: string %s, encoding/json %s", s, got[1:], want)
		}
		if got := String(nil, []byte(s)); string(got) != string(want) {
			t.Fatalf("%q: bytes %s, encoding/json %s", s, got, want)
		}
	})
}

// TestInt32s: ids as encoding/json writes an []int32, and nil as [].
func TestInt32s(t *testing.T) {
	for _, ids := range [][]int32{{}, {0}, {7, -3, 2147483647, -2147483648}} {
		want, _ := json.Marshal(ids)
		if got := Int32s([]byte("x"), ids); string(got) != "x"+string(want) {
			t.Errorf("%v: %s, encoding/json %s", ids, got[1:], want)
		}
	}
	if got := Int32s(nil, nil); string(got) != "[]" {
		t.Errorf("nil: %s, want []", got)
	}
}
