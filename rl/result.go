package rl

import (
	"regexp"
	"strconv"
)

// Exit code and timeout renderings of the harnesses (see the package doc).
var (
	exitPatterns = []*regexp.Regexp{
		regexp.MustCompile(`Process exited with code (-?\d+)`), // Codex CLI
		regexp.MustCompile(`(?m)^Exit Code: (-?\d+)`),          // Qwen Code
	}
	timeoutPattern = regexp.MustCompile(`(?:bash|shell) tool terminated command after exceeding timeout \d+ ms`) // opencode
)

func newResult(i int, text string) *Result {
	r := &Result{MessageIndex: i, Text: text}
	for _, p := range exitPatterns {
		if m := p.FindStringSubmatchIndex(text); m != nil {
			if n, err := strconv.Atoi(text[m[2]:m[3]]); err == nil {
				r.ExitCode, r.Exit = &n, Span{MessageIndex: i, Start: m[0], End: m[1]}
			}
			break
		}
	}
	if m := timeoutPattern.FindStringIndex(text); m != nil {
		r.TimedOut, r.Timeout = true, Span{MessageIndex: i, Start: m[0], End: m[1]}
	}
	r.Tests = ParseTests(text)
	if r.Tests != nil {
		r.Tests.Summary.MessageIndex = i
	}
	return r
}
