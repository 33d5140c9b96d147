package main

import (
	"encoding/base64"
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
	exitTimedOut   = 124
	exitSignalBase = 128
)

// newExecCmd builds "genesis exec".
func newExecCmd(a *app) *cobra.Command {
	var (
		req       client.ExecRequest
		timeout   time.Duration
		env       []string
		stdinFile string
	)
	cmd := &cobra.Command{
		Use:   "exec [flags] SANDBOX -- CMD [ARGS...]\n  genesis exec [flags] SANDBOX --script 'SHELL TEXT'",
		Short: "Run a command in a sandbox and relay its output and exit status",
		Long: `Run a command in a sandbox and wait for it to end.

The job's stdout and stderr are written to this process's stdout and stderr
byte for byte, and genesis exits with the job's exit status: 124 when the job
timed out, 128+N when it was killed by signal N. A note goes to stderr when
output was truncated or the job did not exit by itself.

Here --timeout is the job's time limit (0: the service default); the call
itself waits that long plus 30s.`,
		Args: minArgs(1, "SANDBOX and a command (after --) or --script"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			if dash := cmd.ArgsLenAtDash(); dash == 0 {
				return usageErrorf("SANDBOX must come before --")
			}
			sandbox, command := args[0], args[1:]
			switch {
			case len(command) > 0 && req.Script != "":
				return usageErrorf("give either a command after -- or --script, not both")
			case len(command) == 0 && req.Script == "":
				return usageErrorf("no command: give one after -- or use --script")
			}
			req.Command = command
			if timeout < 0 {
				return usageErrorf("--timeout must not be negative")
			}
			if timeout%time.Millisecond != 0 {
				timeout = timeout.Truncate(time.Millisecond) + time.Millisecond
			}
			req.TimeoutMS = timeout.Milliseconds()
			if req.MaxOutputBytes < 0 {
				return usageErrorf("--max-output-bytes must not be negative")
			}
			var err error
			if req.Env, err = parseKV("env", env); err != nil {
				return err
			}
			if stdinFile != "" {
				if req.Stdin, err = a.readStdin(stdinFile); err != nil {
					return err
				}
			}

			c, err := a.client()
			if err != nil {
				return err
			}
			wait := execWaitDefault
			if timeout > 0 {
				wait = timeout + execWaitGrace
			}
			ctx, cancel := withTimeout(cmd.Context(), wait)
			defer cancel()
			res, err := c.Exec(ctx, sandbox, req)
			if err != nil {
				return err
			}
			return a.relayExec(res, timeout)
		}),
	}
	f := cmd.Flags()
	// Shadows the global --timeout: for exec it is the job's limit.
	f.DurationVar(&timeout, "timeout", 0, "job time limit, e.g. 30s (0: service default)")
	f.StringVar(&req.Cwd, "cwd", "", "working directory in the sandbox")
	f.StringArrayVar(&env, "env", nil, "environment variable KEY=VALUE (repeatable)")
	f.StringVar(&stdinFile, "stdin-file", "", "send this file as the job's stdin (- for this process's stdin)")
	f.StringVar(&req.Script, "script", "", "shell text run by /bin/sh -c instead of a command")
	f.Int64Var(&req.MaxOutputBytes, "max-output-bytes", 0, "cap on each output stream (0: service default)")
	return cmd
}

// readStdin reads the job's stdin from a file or, for "-", from stdin. The
// API carries stdin as a JSON string, so it must be valid UTF-8.
func (a *app) readStdin(name string) (string, error) {
	var (
		b   []byte
		err error
	)
	if name == "-" {
		b, err = io.ReadAll(a.stdin)
	} else {
		b, err = os.ReadFile(name)
	}
	if err != nil {
		return "", usageErrorf("--stdin-file: %v", err)
	}
	if !utf8.Valid(b) {
		return "", usageErrorf("--stdin-file: input is not valid UTF-8 text; the API carries stdin as text")
	}
	return string(b), nil
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
	}
	if res.StdoutTruncated {
		a.warnf("stdout truncated: %d bytes produced, the rest was dropped", res.StdoutBytes)
	}
	if res.StderrTruncated {
		a.warnf("stderr truncated: %d bytes produced, the rest was dropped", res.StderrBytes)
	}
	switch res.ExitReason {
	case "exited", "":
	case "timeout":
		limit := timeout
		if limit <= 0 {
			limit = time.Duration(res.DurationMS) * time.Millisecond
		}
		a.warnf("job timed out after %s", limit)
	case "signal":
		a.warnf("job killed by signal %s", orDash(res.Signal))
	case "oom":
		a.warnf("job killed: out of memory")
	case "canceled":
		a.warnf("job canceled")
	default:
		a.warnf("job ended: %s", res.ExitReason)
	}
	if code := jobExitStatus(res); code != 0 {
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
func jobExitStatus(res *client.ExecResult) int {
	switch res.ExitReason {
	case "timeout":
		return exitTimedOut
	case "signal":
		if n := signalNumber(res.Signal); n > 0 {
			return exitSignalBase + n
		}
		if res.ExitCode > exitSignalBase && res.ExitCode <= 255 {
			return res.ExitCode
		}
		return 1
	}
	code := res.ExitCode
	if code < 0 || code > 255 {
		return 1
	}
	if code == 0 && res.ExitReason != "exited" && res.ExitReason != "" {
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
