package recorder

import "testing"

// TestIdleEncoders: a look is due every Max/2 writes, and an encoder is
// idle once Max writes went by since its last.
func TestIdleEncoders(t *testing.T) {
	ie := IdleEncoders{Max: 8}
	var due []uint64
	for tick := uint64(1); tick <= 12; tick++ {
		if ie.Due(tick) {
			due = append(due, tick)
		}
	}
	if len(due) != 3 || due[0] != 4 || due[1] != 8 || due[2] != 12 {
		t.Errorf("looks due at %v, want [4 8 12]", due)
	}
	if ie.Idle(10, 3) || !ie.Idle(11, 3) {
		t.Errorf("last written at 3: idle at 10 %v, at 11 %v; want false, true", ie.Idle(10, 3), ie.Idle(11, 3))
	}
	one := IdleEncoders{Max: 1}
	if !one.Due(1) || !one.Due(2) {
		t.Error("with Max 1, a look is due every write")
	}
}
