// Package agent implements genesis-agent, the static process supervisor that
// runs as PID 1 inside every sandbox container.
//
// It owns: reaping every child (it is PID 1 or a child subreaper), forwarding
// termination signals to running jobs, running jobs in their own process
// groups with captured and capped output, timeouts and cancellation, and the
// HTTP/2 (cleartext, prior knowledge) server on the per-sandbox Unix socket
// that speaks the agentproto protocol.
//
// The agent never uses os/exec: the supervisor's reaper calls wait4(-1)
// and dispatches statuses to the jobs that registered their pids, so
// nothing else may wait for children in this process. It runs on SIGCHLD,
// and for the direct exec also as soon as the command's output ends.
//
// Synchronous execs (POST /v1/exec), background jobs (/v1/jobs) and
// terminals (pty.go) run the same way: under a subreaper, so everything the
// command forks stays below it, even after setsid or a double fork, and a
// timeout, a cancel or the command's exit kills the whole tree. The
// subreaper is a shim, the agent binary re-executed as a child subreaper
// (shim.go), or — for one synchronous exec at a time, the direct slot
// (direct.go) — the agent itself, which saves the hand-over to another
// process. Shims are started ahead of their jobs and reused (spare.go), so
// a start does not wait for a process and its runtime to come up. An exec
// is a job that lives only as long as its request and is collected into
// one answer.
// Job output is kept in memory up to a cap per stream (output.go) and
// streamed as agentproto frames from any offset, so a dropped connection
// loses nothing.
//
// File operations live in internal/agent/fsops; files.go only maps the
// file routes onto it.
//
// A port of the sandbox's loopback is reached through one request that
// carries a TCP connection full duplex (ports.go): a service inside a
// sandbox without network is reachable by the host.
//
// It imports only the standard library, agentproto, fsops, errdefs,
// mountinfo, golang.org/x/sys/unix and github.com/creack/pty (terminals);
// it must not import the service's control, driver or store packages,
// since it is built into a small static binary that runs inside untrusted
// containers.
package agent
