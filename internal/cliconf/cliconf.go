// Package cliconf gives every flag of a command an environment variable and
// a config file key, derived from the flag itself, so that the FlagSet is
// the one table of a command's settings.
//
// A flag named idle-timeout reads PREFIX_IDLE_TIMEOUT from the environment
// and the key idle-timeout (or idle_timeout) from a YAML config file.
// [Apply] fills every flag the command line left unset: from the
// environment first, else from the file, through the flag's own
// [pflag.Value.Set], so a bad value is an error naming the flag and where
// the value came from. Precedence is command line > environment > config
// file > the flag's default.
package cliconf

import (
	"strings"

	"github.com/spf13/pflag"
)

// Annotation keys stored on a flag.
const (
	annEnv    = "cliconf/env"    // env names replacing the derived one
	annNoFile = "cliconf/nofile" // no config file key (secrets, --config)
	annDoc    = "cliconf/doc"    // Document already ran on this flag
)

// SetEnv makes flag name read the environment variables names, in order,
// instead of its derived one: for names that predate the derivation, and
// for a flag whose value differs per server (each listens on its own
// address). It panics if the flag is not in fs.
func SetEnv(fs *pflag.FlagSet, name string, names ...string) {
	mustAnnotate(fs, name, annEnv, names)
}

// EnvOnly keeps flag name out of config files: secrets come from the
// command line or the environment only.
func EnvOnly(fs *pflag.FlagSet, name string) {
	mustAnnotate(fs, name, annNoFile, []string{"true"})
}

func mustAnnotate(fs *pflag.FlagSet, name, key string, values []string) {
	if err := fs.SetAnnotation(name, key, values); err != nil {
		panic("cliconf: " + err.Error())
	}
}

// Alias registers old as a hidden, deprecated spelling of flag name: both
// set the same value, and using old prints a note naming the new flag. It
// panics if name is not in fs.
func Alias(fs *pflag.FlagSet, old, name string) {
	f := fs.Lookup(name)
	if f == nil {
		panic("cliconf: alias of unknown flag --" + name)
	}
	fs.AddFlag(&pflag.Flag{Name: old, Usage: f.Usage, Value: f.Value, DefValue: f.DefValue,
		NoOptDefVal: f.NoOptDefVal, Deprecated: "use --" + name, Hidden: true})
}

// bound reports whether f takes a value from the environment or a file:
// every flag except help and deprecated aliases.
func bound(f *pflag.Flag) bool {
	return f.Name != "help" && f.Deprecated == ""
}

// EnvNames returns the environment variables flag f reads, in order:
// prefix plus the flag name in upper snake case, unless [SetEnv] named
// others. It returns nil for a flag that reads none.
func EnvNames(prefix string, f *pflag.Flag) []string {
	if !bound(f) {
		return nil
	}
	if names := f.Annotations[annEnv]; len(names) > 0 {
		return names
	}
	return []string{prefix + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))}
}

// Key returns flag f's config file key, or "" when it has none.
func Key(f *pflag.Flag) string {
	if !bound(f) || len(f.Annotations[annNoFile]) > 0 {
		return ""
	}
	return f.Name
}

// Document appends the environment variables of every flag of fs to its
// usage text, once, so that help shows them.
func Document(fs *pflag.FlagSet, prefix string) {
	fs.VisitAll(func(f *pflag.Flag) {
		names := EnvNames(prefix, f)
		if len(names) == 0 || len(f.Annotations[annDoc]) > 0 {
			return
		}
		f.Usage += " (env " + strings.Join(names, " or ") + ")"
		mustAnnotate(fs, f.Name, annDoc, []string{"true"})
	})
}
