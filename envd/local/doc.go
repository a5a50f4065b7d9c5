// Package local runs envd sandboxes as bubblewrap jails on this machine.
// A jail holds untrusted code: a read-only minimal root (the host's
// system directories and a filtered copy of /etc, or an OCI/docker image
// unpacked once into a content-addressed cache), a size-limited tmpfs work
// dir, an unprivileged user (uid 65534 on the host when envd is root),
// its own PID, IPC, UTS, user and network namespaces, no capabilities,
// no_new_privs and cgroup limits with documented defaults. In network mode
// proxy the agent inside bridges 127.0.0.1:PORT to envd's gate on a Unix
// socket, which passes only the sandbox's own episode's model routes.
// docs/envd.md states what a sandbox can and cannot do.
package local
