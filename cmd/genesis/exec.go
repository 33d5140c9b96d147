package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"genesis.dev/sandbox/client"
)

// execWaitGrace is how much longer than the job's own timeout the CLI
// waits for the answer of an exec call.
const execWaitGrace = 30 * time.Second

// execWaitDefault bounds an exec call that sets no job timeout; the service
// applies its own default job timeout, which should be far shorter.
const execWaitDefault = 10 * time.Minute

// Exit statuses of genesis exec for jobs that did not exit by themselves,
// following the conventions of timeout(1) and the shell.
const (
	exitTimedOut    = 124
	exitSignalBase  = 128
	exitInterrupted = exitSignalBase + 2 // SIGINT
)

// execFlags are the flags that shape an exec request, shared by "exec" and
// "session exec".
type execFlags struct {
	req       client.ExecRequest
	timeout   time.Duration
	env       []string
	stdinFile string
	artifacts []string
}

// register adds the flags to cmd.
func (f *execFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	// Shadows the global --timeout: here it is the job's limit.
	fs.DurationVar(&f.timeout, "timeout", 0, "job time limit, e.g. 30s (0: the service default, 60s; none for a background job)")
	fs.StringVar(&f.req.Cwd, "cwd", "", "working directory in the sandbox")
	fs.StringArrayVar(&f.env, "env", nil, "environment variable KEY=VALUE (repeatable)")
	fs.StringVar(&f.stdinFile, "stdin-file", "", "send this file as the job's stdin (- for this process's stdin)")
	fs.StringVar(&f.req.Script, "script", "", "shell text run by /bin/sh -c instead of a command")
	fs.Int64Var(&f.req.MaxOutputBytes, "max-output-bytes", 0, "cap on each output stream (0: service default)")
	fs.StringArrayVar(&f.artifacts, "artifact", nil, "keep files matching GLOB (below /workspace) when the job ends (repeatable)")
}

// build checks the arguments (TARGET, then the command after --) and
// returns the target and the request.
func (f *execFlags) build(a *app, cmd *cobra.Command, args []string, target string) (string, client.ExecRequest, error) {
	req := f.req
	if dash := cmd.ArgsLenAtDash(); dash == 0 {
		return "", req, usageErrorf("%s must come before --", target)
	}
	id, command := args[0], args[1:]
	switch {
	case len(command) > 0 && req.Script != "":
		return "", req, usageErrorf("give either a command after -- or --script, not both")
	case len(command) == 0 && req.Script == "":
		return "", req, usageErrorf("no command: give one after -- or use --script")
	}
	req.Command = command
	if f.timeout < 0 {
		return "", req, usageErrorf("--timeout must not be negative")
	}
	if f.timeout%time.Millisecond != 0 {
		f.timeout = f.timeout.Truncate(time.Millisecond) + time.Millisecond
	}
	req.TimeoutMS = f.timeout.Milliseconds()
	if req.MaxOutputBytes < 0 {
		return "", req, usageErrorf("--max-output-bytes must not be negative")
	}
	if len(f.artifacts) > 0 {
		req.Artifacts = &client.ArtifactRequest{Paths: f.artifacts}
	}
	var err error
	if req.Env, err = parseKV("env", f.env); err != nil {
		return "", req, err
	}
	if f.stdinFile != "" {
		if req.Stdin, req.StdinBase64, err = a.readStdin(f.stdinFile); err != nil {
			return "", req, err
		}
	}
	return id, req, nil
}

// wait is how long the CLI waits for a job: its time limit plus a grace,
// or a default when it has none.
func (f *execFlags) wait() time.Duration {
	if f.timeout > 0 {
		return f.timeout + execWaitGrace
	}
	return execWaitDefault
}

// newExecCmd builds "genesis exec".
func newExecCmd(a *app) *cobra.Command {
	var (
		f                               execFlags
		stream, background, interactive bool
	)
	cmd := &cobra.Command{
		Use:   "exec [flags] SANDBOX -- CMD [ARGS...]\n  genesis exec [flags] SANDBOX --script 'SHELL TEXT'",
		Short: "Run a command in a sandbox and relay its output and exit status",
		Long: `Run a command in a sandbox and wait for it to end.

The job's stdout and stderr are written to this process's stdout and stderr
byte for byte, and genesis exits with the job's exit status: 124 when the job
timed out, 128+N when it was killed by signal N. A note goes to stderr when
output was truncated or the job did not exit by itself.

With --stream the output is written as it is produced; a dropped connection
is resumed where it broke, and an interrupt (Ctrl-C) cancels the job. With
-o json --stream each event is printed as one JSON object per line.

With --background the job is started and its id printed at once; follow it
with "genesis logs -f JOB" and stop it with "genesis cancel JOB". A background
job has no time limit unless --timeout gives one: it runs until it ends, is
cancelled, or its sandbox ends (a server such as python3 -m http.server).

With -i this process's stdin is piped into the job as it is read (the job's
stdin ends when this stdin does), and the output is written as it comes:
for interactive programs such as a stdio server or a REPL.

Here --timeout is the job's time limit (0: the service default, 60s unless
the service is configured otherwise; none with --background); the call
itself waits that long plus 30s.`,
		Args: minArgs(1, "SANDBOX and a command (after --) or --script"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			if stream && background {
				return usageErrorf("--stream and --background do not go together")
			}
			if interactive && (background || f.stdinFile != "") {
				return usageErrorf("-i does not go with --background or --stdin-file")
			}
			sandbox, req, err := f.build(a, cmd, args, "SANDBOX")
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			if background {
				ctx, cancel := a.callContext(cmd.Context())
				defer cancel()
				job, err := c.StartJob(ctx, sandbox, req)
				if err != nil {
					return err
				}
				if a.jsonOutput() {
					return printJSON(a.stdout, job)
				}
				_, err = fmt.Fprintln(a.stdout, job.ID)
				return err
			}
			if interactive {
				return a.interactiveExec(cmd.Context(), c, sandbox, req, f.timeout)
			}
			ctx, cancel := withTimeout(cmd.Context(), f.wait())
			defer cancel()
			if stream {
				return a.streamExec(cmd.Context(), ctx, c, sandbox, req, f.timeout)
			}
			res, err := c.Exec(ctx, sandbox, req)
			if err != nil {
				return err
			}
			return a.relayExec(res, f.timeout)
		}),
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&stream, "stream", false, "write output as it is produced (resumes after disconnects)")
	cmd.Flags().BoolVar(&background, "background", false, "start the job, print its id and return")
	cmd.Flags().BoolVarP(&interactive, "interactive", "i", false, "pipe this process's stdin into the job and write its output as it comes")
	return cmd
}

// interactiveExec starts the job with a streamed stdin, attaches to it,
// copies this process's stdin in (closing the job's stdin at its end) and
// the output out, and ends with the job's status.
func (a *app) interactiveExec(ctx context.Context, c *client.Client, sandbox string, req client.ExecRequest, timeout time.Duration) error {
	req.StdinStream = true
	sctx, cancel := a.callContext(ctx)
	job, err := c.StartJob(sctx, sandbox, req)
	if err != nil {
		cancel()
		return err
	}
	att, err := c.AttachJob(sctx, job.ID, 0)
	cancel()
	if err != nil {
		return err
	}
	defer att.Close()
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, rerr := a.stdin.Read(buf)
			if n > 0 {
				if _, err := att.Write(buf[:n]); err != nil {
					return
				}
			}
			if rerr != nil {
				att.CloseStdin()
				return
			}
		}
	}()
	x, err := att.Pump(a.stdout, a.stderr)
	if err != nil {
		return err
	}
	return a.reportEnd(jobEnd{reason: x.ExitReason, signal: x.Signal, code: x.ExitCode}, timeout)
}

// readStdin reads the job's stdin from a file or, for "-", from stdin. Text
// goes as stdin; other bytes go exactly, as stdin_base64.
func (a *app) readStdin(name string) (text, b64 string, err error) {
	var b []byte
	if name == "-" {
		b, err = io.ReadAll(a.stdin)
	} else {
		b, err = os.ReadFile(name)
	}
	if err != nil {
		return "", "", usageErrorf("--stdin-file: %v", err)
	}
	if !utf8.Valid(b) {
		return "", base64.StdEncoding.EncodeToString(b), nil
	}
	return string(b), "", nil
}

// streamExec runs a job with a live event stream and relays it. parent is
// the command's context (it ends on an interrupt); ctx also bounds the wait.
func (a *app) streamExec(parent, ctx context.Context, c *client.Client, sandbox string, req client.ExecRequest, timeout time.Duration) error {
	var (
		jobID string
		exit  *client.ExitEvent
	)
	err := c.ExecStream(ctx, sandbox, req, client.StreamOptions{Resume: true}, func(ev client.LogEvent) error {
		switch ev.Event {
		case client.EventJob:
			jobID = ev.Job.ID
		case client.EventExit:
			exit = ev.Exit
		}
		return a.writeEvent(ev)
	})
	if err == nil && exit != nil {
		defer a.hintDefaultLimit(exit.ExitReason, timeout)
		return a.reportEnd(endOfExit(exit), timeout)
	}
	if err == nil {
		err = errors.New("the event stream ended without the job's exit")
	}
	if jobID == "" {
		return err
	}
	return a.leaveJob(parent, c, jobID, err)
}

// leaveJob handles a stream that ended before its job did: after an
// interrupt it cancels the job; otherwise it says how to find the job again.
func (a *app) leaveJob(parent context.Context, c *client.Client, jobID string, err error) error {
	if parent.Err() == nil {
		a.printError("", err)
		a.warnf("job %s may still be running; follow it with: genesis logs -f %s", jobID, jobID)
		return &exitError{code: 1}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), 10*time.Second)
	defer cancel()
	if _, cerr := c.CancelJob(ctx, jobID); cerr != nil {
		a.printError("interrupted; canceling job "+jobID, cerr)
	} else {
		a.warnf("interrupted; canceled job %s", jobID)
	}
	return &exitError{code: exitInterrupted}
}

// writeEvent relays one log event: output bytes to stdout or stderr as they
// are, or, with -o json, the event as one line of JSON.
func (a *app) writeEvent(ev client.LogEvent) error {
	if a.jsonOutput() {
		b, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		_, err = a.stdout.Write(append(b, '\n'))
		return err
	}
	var err error
	switch ev.Event {
	case client.EventStdout:
		_, err = a.stdout.Write(ev.Data)
	case client.EventStderr:
		_, err = a.stderr.Write(ev.Data)
	}
	return err
}

// jobEnd is how a job ended, from an exec result or an exit event.
type jobEnd struct {
	reason, signal, err              string
	code                             int
	stdoutBytes, stderrBytes         int64
	stdoutTruncated, stderrTruncated bool
	durationMS                       int64
}

func endOfResult(r *client.ExecResult) jobEnd {
	return jobEnd{
		reason: r.ExitReason, signal: r.Signal, code: r.ExitCode,
		stdoutBytes: r.StdoutBytes, stderrBytes: r.StderrBytes,
		stdoutTruncated: r.StdoutTruncated, stderrTruncated: r.StderrTruncated, durationMS: r.DurationMS,
	}
}

func endOfExit(x *client.ExitEvent) jobEnd {
	e := jobEnd{
		reason: x.ExitReason, signal: x.Signal, err: x.Error, code: -1,
		stdoutBytes: x.StdoutBytes, stderrBytes: x.StderrBytes,
		stdoutTruncated: x.StdoutTruncated, stderrTruncated: x.StderrTruncated, durationMS: x.DurationMS,
	}
	if x.ExitCode != nil {
		e.code = *x.ExitCode
	}
	return e
}

// relayExec writes the job's output and notes and ends with its status.
func (a *app) relayExec(res *client.ExecResult, timeout time.Duration) error {
	if a.jsonOutput() {
		if err := printJSON(a.stdout, res); err != nil {
			return err
		}
	} else {
		if _, err := a.stdout.Write(a.streamBytes("stdout", res.Stdout, res.StdoutBase64)); err != nil {
			return err
		}
		if _, err := a.stderr.Write(a.streamBytes("stderr", res.Stderr, res.StderrBase64)); err != nil {
			return err
		}
		a.noteArtifacts(res.JobID, res.Artifacts)
	}
	defer a.hintDefaultLimit(res.ExitReason, timeout)
	return a.reportEnd(endOfResult(res), timeout)
}

// hintDefaultLimit follows the note of a synchronous or streamed job that
// timed out at the service's default limit (no --timeout was given) with
// what to do about it.
func (a *app) hintDefaultLimit(reason string, timeout time.Duration) {
	if reason == "timeout" && timeout <= 0 && !a.jsonOutput() {
		fmt.Fprintln(a.stderr, "hint: that is the service's default time limit: give a longer --timeout, or start a server or other long work with --background (no time limit)")
	}
}

// reportEnd prints notes on truncation and on a job that did not exit by
// itself, and ends with the job's status.
func (a *app) reportEnd(e jobEnd, timeout time.Duration) error {
	if e.stdoutTruncated {
		a.warnf("stdout truncated: %d bytes produced, the rest was dropped", e.stdoutBytes)
	}
	if e.stderrTruncated {
		a.warnf("stderr truncated: %d bytes produced, the rest was dropped", e.stderrBytes)
	}
	switch e.reason {
	case "exited", "":
	case "timeout":
		limit := timeout
		if limit <= 0 {
			limit = time.Duration(e.durationMS) * time.Millisecond
		}
		a.warnf("job timed out after %s", limit)
	case "signal":
		a.warnf("job killed by signal %s", orDash(e.signal))
	case "oom":
		a.warnf("job killed: out of memory")
	case "canceled":
		a.warnf("job canceled")
	case "lost":
		if e.err != "" {
			a.warnf("job lost: %s", e.err)
		} else {
			a.warnf("job ended: lost")
		}
	default:
		a.warnf("job ended: %s", e.reason)
	}
	if code := jobExitStatus(e); code != 0 {
		return &exitError{code: code}
	}
	return nil
}

// streamBytes returns the exact bytes of an output stream: the base64 form
// when present, else the text form.
func (a *app) streamBytes(name, text, b64 string) []byte {
	if b64 == "" {
		return []byte(text)
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		a.warnf("%s_base64 is not valid base64 (%v); showing the text form", name, err)
		return []byte(text)
	}
	return b
}

// jobExitStatus maps a job's end to this process's exit status: the exit
// code when it exited, 124 on timeout, 128+N for signal N, and never 0 for
// a job that did not exit by itself.
func jobExitStatus(e jobEnd) int {
	switch e.reason {
	case "timeout":
		return exitTimedOut
	case "signal":
		if n := signalNumber(e.signal); n > 0 {
			return exitSignalBase + n
		}
		if e.code > exitSignalBase && e.code <= 255 {
			return e.code
		}
		return 1
	}
	code := e.code
	if code < 0 || code > 255 {
		return 1
	}
	if code == 0 && e.reason != "exited" && e.reason != "" {
		return 1
	}
	return code
}

// signalNumber parses a reported signal ("SIGKILL", "KILL", "9") into its
// Linux number; 0 when unknown. Sandboxes run Linux, whatever this host is.
func signalNumber(s string) int {
	s = strings.ToUpper(strings.TrimSpace(s))
	if n, err := strconv.Atoi(s); err == nil {
		if n > 0 && n < 128 {
			return n
		}
		return 0
	}
	switch strings.TrimPrefix(s, "SIG") {
	case "HUP":
		return 1
	case "INT":
		return 2
	case "QUIT":
		return 3
	case "ILL":
		return 4
	case "TRAP":
		return 5
	case "ABRT", "IOT":
		return 6
	case "BUS":
		return 7
	case "FPE":
		return 8
	case "KILL":
		return 9
	case "USR1":
		return 10
	case "SEGV":
		return 11
	case "USR2":
		return 12
	case "PIPE":
		return 13
	case "ALRM":
		return 14
	case "TERM":
		return 15
	case "STKFLT":
		return 16
	case "CHLD":
		return 17
	case "CONT":
		return 18
	case "STOP":
		return 19
	case "TSTP":
		return 20
	case "TTIN":
		return 21
	case "TTOU":
		return 22
	case "URG":
		return 23
	case "XCPU":
		return 24
	case "XFSZ":
		return 25
	case "VTALRM":
		return 26
	case "PROF":
		return 27
	case "WINCH":
		return 28
	case "IO", "POLL":
		return 29
	case "PWR":
		return 30
	case "SYS":
		return 31
	}
	return 0
}
