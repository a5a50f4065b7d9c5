package agent

import "os"

// initChildEnv marks the environment of the agent that an init started
// (see [RunInit]), so that it serves instead of becoming an init in turn.
// Like every ORCHARD_AGENT_ variable, baseEnv keeps it from commands.
const initChildEnv = "ORCHARD_AGENT_INIT_CHILD"

// ShouldInit reports whether this process is to be the sandbox's init
// ([RunInit]) rather than the agent itself: it is PID 1 or c.Init asks for
// an init, and it is neither installing itself nor the agent an init
// started.
func ShouldInit(c Config, lookupEnv func(string) (string, bool)) bool {
	if c.Install != "" {
		return false
	}
	if v, _ := lookupEnv(initChildEnv); v == "1" {
		return false
	}
	return c.Init || os.Getpid() == 1
}
