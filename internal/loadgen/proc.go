package loadgen

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// ProcStat is a process's resource use so far.
type ProcStat struct {
	CPU     time.Duration // user + system time of all its threads
	Sys     time.Duration // the system (kernel) part of CPU
	PeakRSS int64         // bytes, VmHWM
	RSS     int64         // bytes, VmRSS
	// Anon is the part of RSS that is the process's own memory (RssAnon):
	// RSS less the pages of its binary and other files it maps.
	Anon int64
	// Reads and Writes count the read and write system calls of all its
	// threads, sockets and files alike (syscr and syscw of /proc/PID/io).
	Reads, Writes int64
}

// proc is a child process under test: an upstream, a proxy or redis.
type proc struct {
	name string
	cmd  *exec.Cmd
	addr string
	log  string        // file holding its stdout and stderr
	done chan struct{} // closed when it has exited
	err  error         // its exit error, once done
}

// startProc starts argv with its output in logDir and waits until ready
// reports true, the process exits, or 15s pass.
func startProc(ctx context.Context, name string, argv, env []string, addr, logDir string,
	ready func(ctx context.Context, addr string) bool) (*proc, error) {
	logPath := logDir + "/" + name + ".log"
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	defer lf.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, addr: addr, log: logPath, done: make(chan struct{})}
	go p.wait()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return nil, fmt.Errorf("%s exited at start (%v): %s", name, p.err, p.tail())
		default:
		}
		if ready(ctx, addr) {
			return p, nil
		}
		if !sleep(ctx, 20*time.Millisecond) {
			break
		}
	}
	p.stop()
	return nil, fmt.Errorf("%s not ready on %s within 15s: %s", name, addr, p.tail())
}

func (p *proc) wait() {
	p.err = p.cmd.Wait()
	close(p.done)
}

// stat reads the process's counters.
func (p *proc) stat() (ProcStat, error) { return readProc(p.cmd.Process.Pid) }

// stop asks the process to end (SIGTERM) and kills it after 20s.
func (p *proc) stop() error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s ignored SIGTERM for 20s and was killed", p.name)
	}
	var ee *exec.ExitError
	if p.err != nil && !(errors.As(p.err, &ee) && !ee.Exited()) {
		return fmt.Errorf("%s: %w: %s", p.name, p.err, p.tail())
	}
	return nil
}

// tail returns the last lines of the process's output.
func (p *proc) tail() string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-3):], " | ")
}

// freeAddr returns a 127.0.0.1 address with a port free right now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// httpReady reports whether GET http://addr/healthz answers 200.
func httpReady(ctx context.Context, addr string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/healthz", nil)
	if err != nil {
		return false
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode == http.StatusOK
}

// redisReady reports whether the Redis server at addr answers PING.
func redisReady(ctx context.Context, addr string) bool {
	return redisCommand(ctx, addr, "PING") == nil
}

// redisCommand sends one inline command and expects a +OK-style reply.
func redisCommand(ctx context.Context, addr, cmd string) error {
	var d net.Dialer
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	dl, _ := ctx.Deadline()
	_ = c.SetDeadline(dl)
	if _, err := io.WriteString(c, cmd+"\r\n"); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+") {
		return fmt.Errorf("redis %s: %s", cmd, strings.TrimSpace(line))
	}
	return nil
}

// copyBinaries copies the orchard binary under test and the baseline (if
// any) into dir, fresh files both, and returns the copies' paths. A
// process's resident set counts the pages of its executable mapped in, and
// how many are depends on how the file sits in the page cache: an idle
// `orchard proxy` was seen at 43 MB run from one file and 56 MB from a
// byte-identical one, the difference all file-backed. Run from copies made
// alike, a target and its baseline twin start on the same footing.
func copyBinaries(dir, bin, baseline string) ([2]string, error) {
	var out [2]string
	for i, src := range [2]string{bin, baseline} {
		if src == "" {
			continue
		}
		out[i] = filepath.Join(dir, fmt.Sprintf("orchard-bin-%d", i))
		if err := copyFile(src, out[i]); err != nil {
			return out, fmt.Errorf("copy the binary under test: %w", err)
		}
	}
	return out, nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
