package embedded

import (
	"bytes"
	"testing"
)

// TestSealFrame: a frame sealed in place, after the room left for its
// header, is byte for byte the frame appendFrame makes of its payload.
func TestSealFrame(t *testing.T) {
	for _, n := range []int{0, 1, 100, 70000} {
		payload := bytes.Repeat([]byte{byte(n), 0xff, 7}, n)[:n]
		frame := append(make([]byte, frameHeader), payload...)
		sealFrame(frame)
		if want := appendFrame(nil, payload); !bytes.Equal(frame, want) {
			t.Errorf("%d-byte payload: sealed header %x, want %x", n, frame[:frameHeader], want[:frameHeader])
		}
	}
}
