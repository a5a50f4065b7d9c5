package proxy

import (
	"bytes"
	"fmt"
	"io"
	"testing"
	"testing/iotest"

	"github.com/orchard-rl/orchard/internal/jsonscan"
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

// FuzzChunkDocGet holds the stripper's lookups through a chunk's members
// (what the assembler found validating it) to gjson's lookups of the same
// paths in the whole chunk: the same value at the same offset, repeated
// and escaped keys included.
func FuzzChunkDocGet(f *testing.F) {
	for _, s := range []string{
		`{"id":"x","choices":[{"index":0,"delta":{},"logprobs":null,"token_ids":[1]}],"prompt_token_ids":[5,6]}`,
		`{"choices":"","choices":[{"logprobs":{}}],"usage":null}`,
		`{"choices":[{}],"choices":[{"logprobs":1,"stop_reason":null}],"usage":{"a":1},"usage":2}`,
		`{"us\u0061ge":1,"usage":2,"choices":[]}`,
		`{"prompt_token_ids":"x","prompt_token_ids":[1]}`,
		`{}`,
	} {
		f.Add([]byte(s))
	}
	paths := []string{"usage", "choices", "choices.#", "choices.0", "choices.0.token_ids", "choices.1.logprobs",
		"choices.0.stop_reason", "prompt_token_ids", "choices.0.prompt_token_ids"}
	f.Fuzz(func(t *testing.T, data []byte) {
		members, ok := jsonscan.ValidMembers(data, nil)
		if !ok {
			return
		}
		d := chunkDoc{data: data, members: members, known: true}
		for _, p := range paths {
			got, want := d.get(p), lookup(data, p)
			if got.Exists() != want.Exists() || got.Raw != want.Raw || got.Index != want.Index || got.Type != want.Type {
				t.Fatalf("%s in %q: %q at %d (%v), gjson %q at %d (%v)", p, data, got.Raw, got.Index, got.Type, want.Raw, want.Index, want.Type)
			}
		}
	})
}

// waitReader is a reader whose Read checks, before it yields each piece,
// that the stripper reading it holds no output buffer: a stream waiting
// for the upstream hands its buffer to the others.
type waitReader struct {
	t      *testing.T
	s      **stripper
	pieces [][]byte
}

func (w *waitReader) Read(p []byte) (int, error) {
	if s := *w.s; s != nil && cap(s.out) != 0 {
		w.t.Errorf("waiting for the upstream with an output buffer of %d bytes", cap(s.out))
	}
	if len(w.pieces) == 0 {
		return 0, io.EOF
	}
	n := copy(p, w.pieces[0])
	w.pieces = w.pieces[1:]
	return n, nil
}

// TestStripperWaitsWithoutBuffer streams through the stripper with a reader
// that yields one event at a time, reading with a buffer smaller than an
// event (the output is then drained over several Reads) and with a large
// one, and checks the output and that no output buffer is held while the
// stripper waits for the upstream or once its output is drained.
func TestStripperWaitsWithoutBuffer(t *testing.T) {
	rules := stripRules{fields: []assemble.Unseen{{Name: "token_ids", PerChoice: true}}}
	ev := "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"token_ids\":[7]}]}\n\n"
	want := "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"token_ids\":null}]}\n\n"
	for _, size := range []int{16, 32 << 10} {
		var s *stripper
		r := &waitReader{t: t, s: &s, pieces: [][]byte{[]byte(ev), []byte(ev), []byte(ev)}}
		s = newStripper(io.NopCloser(r), rules, nil)
		var got []byte
		buf := make([]byte, size)
		for {
			n, err := s.Read(buf)
			got = append(got, buf[:n]...)
			if s.off == len(s.out) && cap(s.out) != 0 {
				t.Errorf("read of %d: output drained but its buffer held", size)
			}
			if err != nil {
				break
			}
		}
		s.Close()
		if string(got) != want+want+want {
			t.Errorf("read of %d: got %q", size, got)
		}
	}
}

// TestStrippersConcurrent strips the same streams on four goroutines at
// once, each stripper handing its output buffer to the others while it
// waits (see outBufs), and holds every output to the stream stripped
// alone: under the race detector, a buffer shared between two live
// strippers shows as a race or as bytes of another stream.
func TestStrippersConcurrent(t *testing.T) {
	rules := stripRules{fields: []assemble.Unseen{{Name: "prompt_token_ids"}, {Name: "token_ids", PerChoice: true}, {Name: "logprobs", PerChoice: true}}}
	streams := [][]byte{loadStream(40), topLogprobsStream(30), promptStream(500)}
	strip := func(raw []byte, step int) ([]byte, error) {
		s := newStripper(io.NopCloser(&chunkReader{b: raw, n: step}), rules, nil)
		defer s.Close()
		return io.ReadAll(s)
	}
	want := make([][]byte, len(streams))
	for i, raw := range streams {
		var err error
		if want[i], err = strip(raw, len(raw)); err != nil {
			t.Fatal(err)
		}
	}
	errs := make(chan error, 4)
	for g := range 4 {
		go func() {
			for k := range 30 {
				i := (g + k) % len(streams)
				got, err := strip(streams[i], 64+97*g+k)
				if err == nil && !bytes.Equal(got, want[i]) {
					err = fmt.Errorf("goroutine %d, stream %d: %d bytes differ from the stream stripped alone", g, i, len(got))
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
