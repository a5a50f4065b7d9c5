package proxy

import (
	"bytes"
	"io"
	"testing"
	"testing/iotest"

	"github.com/orchard-rl/orchard/internal/sse"
	"github.com/orchard-rl/orchard/proxy/assemble"
)

func TestStripUsage(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{
			name: "openai usage null on every chunk and a usage chunk",
			in: "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}],\"usage\":null}\n\n" +
				": ping\n\n" +
				"data: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1,\"total_tokens\":4}}\n\n" +
				"data: [DONE]\n\n",
			want: "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n" +
				": ping\n\n" +
				"data: [DONE]\n\n",
		},
		{
			name: "vllm: no usage on chunks, crlf endings",
			in: "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\r\n\r\n" +
				"data: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":1}}\r\n\r\n" +
				"data: [DONE]\r\n\r\n",
			want: "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\r\n\r\n" +
				"data: [DONE]\r\n\r\n",
		},
		{
			name: "usage on the last content chunk is kept",
			in:   "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":1}}\n\n",
			want: "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":1}}\n\n",
		},
		{
			name: "unterminated tail passes through",
			in:   "data: {\"choices\":[],\"usage\":null}\n\ndata: {\"cut",
			want: "data: {\"choices\":[]}\n\ndata: {\"cut",
		},
		{
			name: "non-json and unknown events untouched",
			in:   "event: weird\ndata: not json\n\nid: 7\nretry: 100\n\n",
			want: "event: weird\ndata: not json\n\nid: 7\nretry: 100\n\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, name := range []string{"whole", "one byte at a time"} {
				var src io.Reader = bytes.NewReader([]byte(tt.in))
				if name != "whole" {
					src = iotest.OneByteReader(src)
				}
				s := newStripper(io.NopCloser(src), stripRules{usage: true, nullUsage: true}, nil)
				got, err := io.ReadAll(s)
				if err != nil {
					t.Fatalf("%s: ReadAll: %v", name, err)
				}
				if string(got) != tt.want {
					t.Errorf("%s: stripped =\n%q\nwant\n%q", name, got, tt.want)
				}
			}
		})
	}
}

func TestStripperPassesReadError(t *testing.T) {
	in := "data: {\"choices\":[{\"delta\":{}}],\"usage\":null}\n\ndata: {\"partial"
	src := io.MultiReader(bytes.NewReader([]byte(in)), iotest.ErrReader(io.ErrUnexpectedEOF))
	s := newStripper(io.NopCloser(src), stripRules{usage: true, nullUsage: true}, nil)
	got, err := io.ReadAll(s)
	if err != io.ErrUnexpectedEOF {
		t.Fatalf("err = %v, want %v", err, io.ErrUnexpectedEOF)
	}
	want := "data: {\"choices\":[{\"delta\":{}}]}\n\ndata: {\"partial"
	if string(got) != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestRecordableEncodings(t *testing.T) {
	tests := []struct{ in, want string }{
		{"zstd,gzip", "zstd,gzip"},
		{"gzip, deflate, br, zstd", "gzip, deflate, zstd"},
		{"br", "identity"},
		{"gzip;q=1.0, br;q=0.5", "gzip;q=1.0"},
	}
	for _, tt := range tests {
		if got := recordableEncodings(tt.in); got != tt.want {
			t.Errorf("recordableEncodings(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func FuzzStripper(f *testing.F) {
	f.Add([]byte("data: {\"choices\":[],\"usage\":null}\n\ndata: [DONE]\n\n"), uint8(3))
	f.Add([]byte("data: {\"usage\":null,\"a\":1}\r\n\r\n"), uint8(1))
	f.Fuzz(func(t *testing.T, in []byte, chunk uint8) {
		var src io.Reader = bytes.NewReader(in)
		if chunk%2 == 1 {
			src = iotest.OneByteReader(src)
		}
		got, err := io.ReadAll(newStripper(io.NopCloser(src), stripRules{usage: true, nullUsage: true}, nil))
		if err != nil {
			t.Fatal(err)
		}
		// With nothing to strip the stream must come out byte for byte.
		if !bytes.Contains(in, []byte("usage")) && !bytes.Equal(got, in) {
			t.Fatalf("stream without usage changed:\n%q\n%q", in, got)
		}
	})
}

// TestStripperGivesUpSays: an event past the framer's limit goes out as
// received, with the injected field, and the stripper says it gave up
// (the record notes it in its error).
func TestStripperGivesUpSays(t *testing.T) {
	small := "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},\"token_ids\":[1]}]}\n\n"
	big := "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" + string(bytes.Repeat([]byte("x"), 300)) + "\"},\"token_ids\":[2]}]}\n\n"
	s := newStripper(io.NopCloser(iotest.OneByteReader(bytes.NewReader([]byte(small+big+small)))), stripRules{fields: []assemble.Unseen{{Name: "token_ids", PerChoice: true}}}, nil)
	s.f = sse.NewFramer(256) // not returned to the pool: never closed
	passed := false
	s.gaveUp = &passed
	got, err := io.ReadAll(s)
	if err != nil {
		t.Fatal(err)
	}
	want := "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},\"token_ids\":null}]}\n\n" + big + small
	if string(got) != want || !passed {
		t.Fatalf("gave up: %v; got\n%q\nwant\n%q", passed, got, want)
	}
}
