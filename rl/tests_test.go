package rl

import (
	"testing"
)

func TestParseTests(t *testing.T) {
	tests := []struct {
		name, text     string
		runner         string
		passed, failed int
		summary        string
	}{
		{"pytest -rA", "PASSED t.py::test_a\nFAILED t.py::test_b - boom\n==== 1 failed, 1 passed in 0.1s ====", "pytest", 1, 1, "==== 1 failed, 1 passed in 0.1s ===="},
		{"pytest -v", "t.py::test_a PASSED [ 50%]\nt.py::test_b PASSED [100%]\n", "pytest", 2, 0, "t.py::test_a PASSED"},
		{"go test", "=== RUN   TestA\n--- FAIL: TestA (0.00s)\n--- PASS: TestB (0.00s)\nFAIL\nFAIL\tpkg\t0.01s", "go", 1, 1, "FAIL\tpkg\t0.01s"},
		{"cargo", "test a ... ok\ntest b ... FAILED\n\ntest result: FAILED. 1 passed; 1 failed; 0 ignored", "cargo", 1, 1, "test result: FAILED. 1 passed; 1 failed; 0 ignored"},
		{"jest", "  ✓ adds (3 ms)\n  ✕ subtracts (1 ms)\nTests:       1 failed, 1 passed, 2 total", "jest", 1, 1, "Tests:       1 failed, 1 passed, 2 total"},
		{"vitest", " × subtracts\n ✓ adds\n      Tests  1 failed | 1 passed (2)", "jest", 1, 1, "      Tests  1 failed | 1 passed (2)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ParseTests(tt.text)
			if got == nil {
				t.Fatalf("ParseTests(%q) = nil", tt.text)
			}
			if got.Runner != tt.runner || got.Passed != tt.passed || got.Failed != tt.failed || tt.text[got.Summary.Start:got.Summary.End] != tt.summary {
				t.Errorf("ParseTests = %s %d passed %d failed summary %q, want %s %d %d %q", got.Runner, got.Passed, got.Failed,
					tt.text[got.Summary.Start:got.Summary.End], tt.runner, tt.passed, tt.failed, tt.summary)
			}
		})
	}
	if got := ParseTests("All tests passed!"); got != nil {
		t.Errorf("ParseTests(prose) = %+v, want nil", got)
	}
}

// FuzzParseTests: any text parses without panic, and spans stay inside it.
func FuzzParseTests(f *testing.F) {
	f.Add("PASSED a::b\n== 1 passed in 1s ==")
	f.Add("--- FAIL: T (0s)\nFAIL")
	f.Add("test x ... ok\ntest result: ok. 1 passed; 0 failed")
	f.Fuzz(func(t *testing.T, s string) {
		if r := ParseTests(s); r != nil && (r.Summary.Start < 0 || r.Summary.End > len(s) || r.Summary.Start > r.Summary.End) {
			t.Fatalf("summary span %+v outside %d bytes", r.Summary, len(s))
		}
	})
}

func TestShellActions(t *testing.T) {
	var c Call
	shellActions(&c, `cat src/a.py && sed -i 's/x - y/x + y/' src/a.py; ls tests | head`)
	if len(c.Reads) != 1 || c.Reads[0] != "src/a.py" || len(c.Edits) != 1 || c.Edits[0] != "src/a.py" || len(c.Lists) != 1 || c.Lists[0] != "tests" {
		t.Errorf("reads %v edits %v lists %v, want [src/a.py] [src/a.py] [tests]", c.Reads, c.Edits, c.Lists)
	}
}
