package local

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/orchard-rl/orchard/envd"
)

// etcDenied are /etc entries a jail never sees even when they are
// world-readable: password and group shadows, sudo rules, ssh host keys
// and the machine's identity.
var etcDenied = map[string]bool{
	"shadow": true, "shadow-": true, "gshadow": true, "gshadow-": true, "sudoers": true, "sudoers.d": true,
	"ssh": true, "machine-id": true, ".pwd.lock": true, "security": true, "credstore": true,
	"credstore.encrypted": true, "subuid": true, "subgid": true, "subuid-": true, "subgid-": true,
	"ssl": true, "pki": true, "docker": true, "containerd": true, "kubernetes": true, "orchard": true,
}

// hostRootArgs returns the bubblewrap arguments of the minimal host root
// under the host root dir ("/" outside tests): each of [systemDirs] that
// exists (a symlink stays a symlink) and /etc entry by entry, without
// [etcDenied] and entries that are not world-readable. The CA bundle is
// kept: /etc/ssl/certs is bound alone.
func hostRootArgs(host string) []string {
	var a []string
	for _, name := range systemDirs {
		a = append(a, entryArgs(filepath.Join(host, name), "/"+name)...)
	}
	ents, _ := os.ReadDir(filepath.Join(host, "etc"))
	a = append(a, "--dir", "/etc")
	for _, e := range ents {
		if etcDenied[e.Name()] {
			continue
		}
		a = append(a, entryArgs(filepath.Join(host, "etc", e.Name()), "/etc/"+e.Name())...)
	}
	return append(a, entryArgs(filepath.Join(host, "etc/ssl/certs"), "/etc/ssl/certs")...)
}

// entryArgs binds src at dst read-only (or recreates it as a symlink);
// nothing when src is missing or not world-readable.
func entryArgs(src, dst string) []string {
	st, err := os.Lstat(src)
	switch {
	case err != nil:
		return nil
	case st.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(src)
		if err != nil {
			return nil
		}
		return []string{"--symlink", target, dst}
	case st.Mode().Perm()&0o004 == 0:
		return nil
	}
	return []string{"--ro-bind", src, dst}
}

// installAgent puts the agent binary at dst, where the sandbox user can
// read and run it: a hard link when src is on the same filesystem, else
// a copy. Its own directory may not be reachable by that user (a test
// binary's build dir, /root/go/bin).
func installAgent(src, dst string) error {
	_ = os.Remove(dst)
	if err := os.Link(src, dst); err == nil {
		if st, err := os.Stat(dst); err == nil && st.Mode().Perm()&0o005 == 0o005 {
			return nil
		}
		_ = os.Remove(dst)
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("open agent binary: %w", err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		return fmt.Errorf("install agent binary: %w", err)
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("install agent binary: %w", err)
	}
	return nil
}

// checkTraversable reports the first directory from dir up to / that the
// sandbox user cannot enter: bubblewrap runs as that user and must reach
// the agent binary, the gate socket and image roots under the state dir.
func checkTraversable(dir string) error {
	for d := dir; ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("state dir: %w", err)
		}
		if st.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("state dir %s: %s is not searchable by the sandbox user (chmod o+x %s, or choose another --state-dir)", dir, d, d)
		}
		if d == "/" || d == "." {
			return nil
		}
	}
}

// describeArgs renders bubblewrap arguments as one mount per line, for
// `orchard envd --print-jail`.
func describeArgs(args []string) string {
	var b strings.Builder
	arity := map[string]int{"--ro-bind": 2, "--bind": 2, "--symlink": 2, "--tmpfs": 1, "--dir": 1,
		"--proc": 1, "--dev": 1, "--remount-ro": 1, "--size": 1, "--perms": 1}
	for i := 0; i < len(args); i++ {
		n, ok := arity[args[i]]
		if !ok || i+n >= len(args) {
			continue
		}
		fmt.Fprintf(&b, "%s %s\n", strings.TrimPrefix(args[i], "--"), strings.Join(args[i+1:i+1+n], " "))
		i += n
	}
	return b.String()
}

// DescribeJail lists the mounts and namespaces of the jail spec would
// get, one per line (`orchard envd --print-jail`).
func (b *Backend) DescribeJail(spec envd.Spec) string {
	if spec.Network == "" {
		spec.Network = b.opts.Network
	}
	disk, _ := parseDisk(b.withDefaults(spec.Resources).Disk)
	args := b.bwrapArgs(&spec, "", filepath.Join(b.opts.StateDir, "s", "ID"), disk)
	var ns []string
	for _, a := range args {
		if strings.HasPrefix(a, "--unshare-") {
			ns = append(ns, strings.TrimSuffix(strings.TrimPrefix(a, "--unshare-"), "-try"))
		}
	}
	return fmt.Sprintf("user %d:%d, namespaces %s, network %s, no capabilities, no_new_privs\n%s",
		b.opts.SandboxUID, b.opts.SandboxGID, strings.Join(ns, " "), spec.Network, describeArgs(args))
}
