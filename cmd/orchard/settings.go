package main

import (
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/orchard-rl/orchard/internal/cliconf"
)

// envPrefix starts the environment variable of every flag: --idle-timeout
// is ORCHARD_IDLE_TIMEOUT unless its registration names another.
const envPrefix = "ORCHARD_"

// lookupEnv is how commands read the environment; tests replace it.
var lookupEnv = os.LookupEnv

// addConfigFlag gives every subcommand --config and shows each flag's
// environment variable in its help.
func addConfigFlag(root *cobra.Command) {
	fs := root.PersistentFlags()
	fs.String("config", "", "YAML config file; its keys are flag names (idle-timeout or idle_timeout), "+
		"and a value there is used when neither the command line nor the flag's environment variable gives one; "+
		"keys of other subcommands are skipped, so one file can serve them all")
	cliconf.EnvOnly(fs, "config")
	documentEnv(root)
}

func documentEnv(c *cobra.Command) {
	cliconf.Document(c.PersistentFlags(), envPrefix)
	cliconf.Document(c.Flags(), envPrefix)
	for _, sub := range c.Commands() {
		documentEnv(sub)
	}
}

// aliasIDFlags keeps --task and --group, the old names of --task-id and
// --group-id in the commands that filter episodes, as deprecated aliases.
func aliasIDFlags(fs *pflag.FlagSet) {
	cliconf.Alias(fs, "task", "task-id")
	cliconf.Alias(fs, "group", "group-id")
}

// applySettings fills every flag of cmd that the command line left unset:
// from its environment variable, else from its key in the --config file.
// The file may hold keys of other subcommands too, so that one file
// serves them all; a key no subcommand has is an error.
func applySettings(cmd *cobra.Command, lookup func(string) (string, bool)) error {
	if cmd.DisableFlagParsing {
		return nil // sandbox-agent parses its own flags
	}
	return cliconf.Apply(cmd.Flags(), cliconf.Options{Prefix: envPrefix, LookupEnv: lookup, ConfigFlag: "config",
		Shared: allFlagSets(cmd.Root())})
}

// allFlagSets returns the flags of c and of every command below it.
func allFlagSets(c *cobra.Command) []*pflag.FlagSet {
	sets := []*pflag.FlagSet{c.LocalFlags()}
	for _, sub := range c.Commands() {
		sets = append(sets, allFlagSets(sub)...)
	}
	return sets
}
