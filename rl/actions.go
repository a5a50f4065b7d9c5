package rl

import (
	"path"
	"regexp"
	"strings"

	"github.com/tidwall/gjson"
)

// Tool name classes, lower-cased, from the harness fixtures' tool lists
// (Claude Code Read/Edit/Write, opencode read/edit/write/glob/grep, Qwen
// Code read_file/edit/write_file/list_directory/glob/grep_search).
var (
	readTools = map[string]bool{"read": true, "read_file": true, "view": true, "read_many_files": true}
	listTools = map[string]bool{"ls": true, "list_directory": true, "glob": true, "grep": true, "grep_search": true, "list": true}
	editTools = map[string]bool{"edit": true, "multiedit": true, "replace": true, "notebookedit": true, "str_replace": true}
)

// pathKeys are the argument names that hold a file path.
var pathKeys = []string{"file_path", "filePath", "absolute_path", "path", "notebook_path", "dir_path", "directory"}

// actions fills what a call with JSON arguments a does: its shell
// command, and the files it reads, lists or edits.
func actions(c *Call, a gjson.Result) {
	c.Command = command(a)
	name := strings.ToLower(c.Name)
	var p string
	for _, k := range pathKeys {
		if p = a.Get(k).String(); p != "" {
			break
		}
	}
	switch {
	case c.Command != "":
		shellActions(c, c.Command)
	case readTools[name] && p != "":
		c.Reads = append(c.Reads, cleanPath(p))
	case listTools[name]:
		c.Lists = append(c.Lists, cleanPath(p))
	case editTools[name] && p != "":
		c.Edits = append(c.Edits, cleanPath(p))
	}
}

// command returns a shell call's command line: "command" or "cmd" as a
// string, or the script of an argv like ["bash", "-lc", script].
func command(a gjson.Result) string {
	for _, k := range []string{"command", "cmd"} {
		v := a.Get(k)
		if v.Type == gjson.String {
			return v.String()
		}
		if v.IsArray() {
			parts := v.Array()
			if len(parts) > 0 {
				return parts[len(parts)-1].String()
			}
		}
	}
	return ""
}

func cleanPath(p string) string {
	if p == "" {
		return "."
	}
	return path.Clean(p)
}

var (
	shellSplit  = regexp.MustCompile(`&&|\|\||[;|\n]`)
	patchTarget = regexp.MustCompile(`(?m)^\*\*\* Update File: (.+)$`)
)

// shellActions reads a command line's simple commands for files read
// (cat, head, tail, less, nl, sed -n, grep/rg with a file), listed (ls,
// find, tree) and edited (sed -i, apply_patch's Update File).
func shellActions(c *Call, cmd string) {
	for _, m := range patchTarget.FindAllStringSubmatch(cmd, -1) {
		c.Edits = append(c.Edits, cleanPath(strings.TrimSpace(m[1])))
	}
	for _, part := range shellSplit.Split(cmd, -1) {
		f := words(part)
		if len(f) == 0 {
			continue
		}
		args := operands(f[1:])
		switch f[0] {
		case "cat", "head", "tail", "less", "nl", "more", "bat":
			c.Reads = appendPaths(c.Reads, args)
		case "grep", "rg", "egrep":
			if len(args) > 1 {
				c.Reads = appendPaths(c.Reads, args[1:])
			}
		case "sed":
			if inPlace(f[1:]) && len(args) > 1 {
				c.Edits = appendPaths(c.Edits, args[1:])
			} else if len(args) > 1 {
				c.Reads = appendPaths(c.Reads, args[1:])
			}
		case "ls", "find", "tree":
			if len(args) == 0 {
				args = []string{"."}
			}
			c.Lists = appendPaths(c.Lists, args[:1])
		}
	}
}

// words splits a simple command into words, keeping quoted text
// (single or double quotes) inside one word, without the quotes.
func words(s string) []string {
	var out []string
	var cur strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			cur.WriteByte(c)
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == ' ' || c == '\t':
			if in {
				out, in = append(out, cur.String()), false
				cur.Reset()
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}

// operands drops flags and redirections from a simple command's words.
func operands(words []string) []string {
	var out []string
	for i := 0; i < len(words); i++ {
		w := words[i]
		switch {
		case w == ">" || w == ">>" || w == "<" || w == "2>":
			i++
		case strings.HasPrefix(w, "-") || strings.HasPrefix(w, ">") || strings.HasPrefix(w, "2>"):
		default:
			out = append(out, w)
		}
	}
	return out
}

func inPlace(words []string) bool {
	for _, w := range words {
		if w == "-i" || strings.HasPrefix(w, "-i") || w == "--in-place" {
			return true
		}
	}
	return false
}

func appendPaths(dst, ps []string) []string {
	for _, p := range ps {
		dst = append(dst, cleanPath(p))
	}
	return dst
}

// SamePath reports whether a and b name the same file, one possibly
// relative to a directory the other names absolutely.
func SamePath(a, b string) bool {
	return a == b || strings.HasSuffix(a, "/"+b) || strings.HasSuffix(b, "/"+a)
}

// Under reports whether file lies in directory dir (or is it).
func Under(file, dir string) bool {
	return SamePath(file, dir) || SamePath(path.Dir(file), dir)
}

var testCommand = regexp.MustCompile(`(?:^|[\s;&|(])(?:pytest|py\.test|go test|cargo test|(?:npm|yarn|pnpm) (?:run )?test|npx (?:jest|vitest)|jest|vitest|tox|make(?: -\S+)* (?:test|check)|python[\d.]* -m (?:pytest|unittest))\b`)

// IsTestCommand reports whether a shell command line runs a test runner.
func IsTestCommand(cmd string) bool { return testCommand.MatchString(cmd) }
