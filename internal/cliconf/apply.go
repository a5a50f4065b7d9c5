package cliconf

import (
	"fmt"

	"github.com/spf13/pflag"
)

// Options says where [Apply] looks for values.
type Options struct {
	// Prefix of the derived environment variable names, e.g. "ORCHARD_".
	Prefix string
	// LookupEnv reads the environment (os.LookupEnv in production). An
	// empty value counts as unset. Nil reads no environment.
	LookupEnv func(string) (string, bool)
	// ConfigFlag names the flag holding the config file path ("" or a
	// flag that is unset and has no environment value: no file).
	ConfigFlag string
	// Shared are the flags of the other commands that read the same
	// config file: a key that is one of their flags is skipped here, so
	// one file can serve every command. Any other key is unknown.
	Shared []*pflag.FlagSet
}

// ValueError is a value from the environment or a config file that its
// flag refused.
type ValueError struct {
	Source string // "ORCHARD_X" or "config FILE: key"
	Value  string
	Flag   *pflag.Flag
	Err    error // what the flag's Set returned
}

// parseTypes are the flag types whose Set errors only repeat the value.
var parseTypes = map[string]bool{"bool": true, "int": true, "int32": true, "int64": true, "uint": true,
	"uint32": true, "uint64": true, "float32": true, "float64": true, "duration": true}

func (e *ValueError) Error() string {
	msg := fmt.Sprintf("%s=%q: invalid %s for --%s", e.Source, e.Value, e.Flag.Value.Type(), e.Flag.Name)
	if !parseTypes[e.Flag.Value.Type()] {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *ValueError) Unwrap() error { return e.Err }

// Apply fills every flag of fs that the command line did not set (nor any
// deprecated alias of it): from its environment variable, else from its key
// in the config file. Call it after parsing the command line. Unknown keys
// in the file are an error naming the key.
func Apply(fs *pflag.FlagSet, o Options) error {
	onCmdLine := changedValues(fs)
	if err := applyConfigFlag(fs, o, onCmdLine); err != nil {
		return err
	}
	file, err := loadFile(fs, o)
	if err != nil {
		return err
	}
	fs.VisitAll(func(f *pflag.Flag) {
		if err == nil && bound(f) && !onCmdLine[f.Value] && f.Name != o.ConfigFlag {
			err = applyFlag(f, o, file)
		}
	})
	return err
}

// changedValues returns the values the command line set, through any of
// their spellings.
func changedValues(fs *pflag.FlagSet) map[pflag.Value]bool {
	set := map[pflag.Value]bool{}
	fs.Visit(func(f *pflag.Flag) { set[f.Value] = true })
	return set
}

// applyConfigFlag gives the config file flag its environment value first,
// since the file cannot name itself.
func applyConfigFlag(fs *pflag.FlagSet, o Options, onCmdLine map[pflag.Value]bool) error {
	f := fs.Lookup(o.ConfigFlag)
	if f == nil || onCmdLine[f.Value] {
		return nil
	}
	_, err := applyEnv(f, o)
	return err
}

// applyFlag sets f from the environment, else from the file.
func applyFlag(f *pflag.Flag, o Options, file *fileConfig) error {
	if ok, err := applyEnv(f, o); ok || err != nil {
		return err
	}
	return file.apply(f)
}

// applyEnv sets f from the first of its environment variables that has a
// value, and reports whether one had.
func applyEnv(f *pflag.Flag, o Options) (bool, error) {
	if o.LookupEnv == nil {
		return false, nil
	}
	for _, name := range EnvNames(o.Prefix, f) {
		v, ok := o.LookupEnv(name)
		if !ok || v == "" {
			continue
		}
		if err := f.Value.Set(v); err != nil {
			return true, &ValueError{Source: name, Value: v, Flag: f, Err: err}
		}
		return true, nil
	}
	return false, nil
}
