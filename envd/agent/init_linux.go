package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
)

// forwardedSignals are passed on from the init to the agent: SIGTERM is how
// a container runtime stops a container, the rest are what an operator may
// send to PID 1 meaning the agent.
var forwardedSignals = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER from <linux/prctl.h>.
const prSetChildSubreaper = 36

// RunInit makes this process a minimal init for the agent and returns the
// status to exit with once the agent has ended. It starts this executable
// again, with the same arguments and the initChildEnv marker, as the agent;
// forwards forwardedSignals to it; and reaps every child that exits, the
// agent's orphans included (PID 1 inherits them; outside PID 1 the init
// makes itself a child subreaper so that it inherits them too). The agent's
// exit status (128+signal when a signal killed it) is the result.
//
// The agent therefore never is PID 1 and never adopts an orphan, so its
// own os/exec waits are the only waits in its process and always get their
// command's status; wait4(-1) runs only here, where no os/exec runs.
//
// A signal that reaches the agent before its Go code has installed
// handlers takes the default action and kills it, which is safe: it has
// not started any command yet. The init then returns 128+signal.
func RunInit(c Config, logger *slog.Logger) (int, error) {
	// Subscribe before the child exists, so that neither its SIGCHLD nor a
	// signal meant for it can be missed: what arrives before the child
	// starts waits in the channel and is forwarded after.
	sigs := make(chan os.Signal, 32)
	signal.Notify(sigs, append([]os.Signal{syscall.SIGCHLD}, forwardedSignals...)...)
	defer signal.Stop(sigs)
	if os.Getpid() != 1 {
		if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e != 0 {
			return 1, fmt.Errorf("init: become child subreaper: %w", e)
		}
	}
	pid, err := startAgentChild(os.Args)
	if err != nil {
		return 1, err
	}
	logger.Info("init started the agent", "pid", pid, "listen", c.Listen)
	for {
		if sig := <-sigs; sig != syscall.SIGCHLD {
			// The agent cannot have been reaped yet (that ends this
			// loop), so pid still names it, if only as a zombie.
			_ = syscall.Kill(pid, sig.(syscall.Signal))
		}
		// Reap after every signal, not only SIGCHLD: signal.Notify drops
		// signals while the channel is full, so a SIGCHLD may be lost
		// behind a burst of forwarded ones.
		if status, done := reapChildren(pid, logger); done {
			logger.Info("agent exited; init exits", "status", status)
			return status, nil
		}
	}
}

// startAgentChild starts /proc/self/exe with args and the initChildEnv
// marker. Besides stdio the child inherits every descriptor this process
// inherited without close-on-exec (such as --listen-fd's socket), at the
// same number, as with any exec.
func startAgentChild(args []string) (int, error) {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, initChildEnv+"=") })
	env = append(env, initChildEnv+"=1")
	pid, err := syscall.ForkExec("/proc/self/exe", args, &syscall.ProcAttr{Env: env, Files: []uintptr{0, 1, 2}})
	if err != nil {
		return 0, fmt.Errorf("init: start agent: %w", err)
	}
	return pid, nil
}

// reapChildren waits, without blocking, for every child that has exited.
// done reports whether the agent was among them; status is then its exit
// status.
func reapChildren(agent int, logger *slog.Logger) (status int, done bool) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case err != nil || pid <= 0: // ECHILD: no children; 0: none exited
			return status, done
		case pid == agent:
			status, done = waitCode(ws), true
		default:
			logger.Debug("init reaped an orphan", "pid", pid, "status", waitCode(ws))
		}
	}
}
