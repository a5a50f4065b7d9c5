package cliconf

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// fileConfig is a parsed config file: flag name -> value as JSON.
type fileConfig struct {
	path string
	keys map[string]fileEntry
}

// fileEntry is one key of the file, as it was spelled there.
type fileEntry struct {
	key string
	raw json.RawMessage
}

// loadFile reads the file the config flag names, if any, and checks that
// every key is the config key of a flag of fs.
func loadFile(fs *pflag.FlagSet, o Options) (*fileConfig, error) {
	f := fs.Lookup(o.ConfigFlag)
	if f == nil || f.Value.String() == "" {
		return nil, nil
	}
	c := &fileConfig{path: f.Value.String(), keys: map[string]fileEntry{}}
	raw, err := readYAML(c.path)
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := c.add(fs, o, k, raw[k]); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// readYAML reads a YAML mapping as JSON values by key. It reads YAML 1.2,
// where a key like n or a value like no is a string, not a boolean.
func readYAML(path string) (map[string]json.RawMessage, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("config %s: want a mapping of keys to values: %w", path, err)
	}
	m := make(map[string]json.RawMessage, len(doc))
	for k, v := range doc {
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("config %s: %s: %w", path, k, err)
		}
		m[k] = raw
	}
	return m, nil
}

// add records key, spelled with dashes or underscores, after checking
// that it names a flag that may come from a file: one of fs, or else one
// of another command's, which is skipped.
func (c *fileConfig) add(fs *pflag.FlagSet, o Options, key string, raw json.RawMessage) error {
	name := strings.ReplaceAll(key, "_", "-")
	f, mine := lookup(fs, o.Shared, name)
	switch {
	case f == nil || f.Name == "help":
		return fmt.Errorf("config %s: unknown key %q", c.path, key)
	case f.Deprecated != "":
		return fmt.Errorf("config %s: key %q was renamed: use %s", c.path, key, strings.TrimPrefix(f.Deprecated, "use --"))
	case Key(f) == "":
		return fmt.Errorf("config %s: key %q cannot be set in a file: use --%s or %s", c.path, key, f.Name, strings.Join(EnvNames(o.Prefix, f), " or "))
	case !mine:
		return nil
	}
	if prev, ok := c.keys[name]; ok {
		return fmt.Errorf("config %s: keys %q and %q are the same setting", c.path, prev.key, key)
	}
	c.keys[name] = fileEntry{key: key, raw: raw}
	return nil
}

// lookup finds flag name in fs, else in the first of shared that has it,
// and reports whether it is one of fs.
func lookup(fs *pflag.FlagSet, shared []*pflag.FlagSet, name string) (*pflag.Flag, bool) {
	if f := fs.Lookup(name); f != nil {
		return f, true
	}
	for _, s := range shared {
		if f := s.Lookup(name); f != nil {
			return f, false
		}
	}
	return nil, false
}

// apply sets f from the file, if the file has its key.
func (c *fileConfig) apply(f *pflag.Flag) error {
	if c == nil {
		return nil
	}
	e, ok := c.keys[f.Name]
	if !ok {
		return nil
	}
	if err := setRaw(f.Value, e.raw); err != nil {
		return &ValueError{Source: "config " + c.path + ": " + e.key, Value: scalar(e.raw), Flag: f, Err: err}
	}
	return nil
}

// setRaw sets v from a JSON value: a list replaces a slice flag's items,
// a string is set as its text, and anything else as written (numbers,
// booleans, and the JSON of objects for flags that parse JSON).
func setRaw(v pflag.Value, raw json.RawMessage) error {
	var list []json.RawMessage
	if sv, ok := v.(pflag.SliceValue); ok && json.Unmarshal(raw, &list) == nil {
		items := make([]string, len(list))
		for i, r := range list {
			items[i] = scalar(r)
		}
		return sv.Replace(items)
	}
	return v.Set(scalar(raw))
}

// scalar returns a JSON string's text, or any other JSON value as written.
func scalar(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}
