package assemble

import (
	"bytes"
	"testing"

	"github.com/orchard-rl/orchard/internal/sse"
)

// TestOneDataLine holds the shortcut to sse.Parse: where it applies, Parse
// finds a nameless event whose data is exactly valid.
func TestOneDataLine(t *testing.T) {
	t.Parallel()
	for _, ev := range []string{
		"data: {}\n\n", "data:{}\n\n", "data:  {}\n\n", "data: {}\r\n\r\n", "data: {}\n",
		"event: x\ndata: {}\n\n", "data: {}\n\nx", "data: {\"a\":1}\n\n", "data: {} \n\n", "dat: {}\n\n",
	} {
		raw := []byte(ev)
		i := bytes.IndexByte(raw, '{')
		for _, end := range []int{i + 2, len(raw) - 2} {
			if end < i || end > len(raw) {
				continue
			}
			valid := raw[i:end]
			p := sse.Parse(raw)
			want := p.HasData && p.Name == "" && len(p.Data) == len(valid) && &p.Data[0] == &valid[0]
			if got := oneDataLine(raw, valid); got && !want {
				t.Errorf("%q, %q: shortcut, but Parse gives %+v", ev, valid, p)
			}
		}
	}
	if !oneDataLine([]byte("data: {}\n\n"), []byte("data: {}\n\n")[6:8]) {
		t.Error("the usual event takes no shortcut")
	}
}
