package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"genesis.dev/sandbox/client"
)

// Output formats of --output.
const (
	outputText = "text"
	outputJSON = "json"
)

// defaultTimeout bounds each API call unless --timeout says otherwise. A
// create may wait for the sandbox's agent (30s by default) and several
// Docker calls, so this is generous; the service bounds its own work.
const defaultTimeout = 2 * time.Minute

// app is the state shared by every command of one invocation: the I/O
// streams, the environment and the global flags.
type app struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
	now    func() time.Time
	http   *http.Client // nil: http.DefaultClient

	// Global flags.
	url     string
	apiKey  string
	actAs   string
	output  string
	timeout time.Duration

	// started is set when a command's action begins; errors before that
	// (flags, arguments, unknown commands) are usage errors.
	started bool
}

// action wraps a command body so that errors it returns are run-time
// errors, not usage errors.
func (a *app) action(fn func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		a.started = true
		return fn(cmd, args)
	}
}

// validateGlobals checks the global flags; it runs before every command.
func (a *app) validateGlobals() error {
	if a.output != outputText && a.output != outputJSON {
		return usageErrorf("--output must be %q or %q, not %q", outputText, outputJSON, a.output)
	}
	if a.timeout < 0 {
		return usageErrorf("--timeout must not be negative")
	}
	return nil
}

// client builds the API client from --url/--api-key or the environment.
func (a *app) client() (*client.Client, error) {
	base := a.baseURL()
	if err := client.ValidateBaseURL(base); err != nil {
		return nil, &usageError{err: fmt.Errorf("%w; set GENESIS_URL or pass --url with the service's address, such as %s", err, client.DefaultURL)}
	}
	key := a.key()
	opts := []client.Option{client.WithUserAgent("genesis-cli/" + buildVersion().Version)}
	if a.http != nil {
		opts = append(opts, client.WithHTTPClient(a.http))
	}
	if a.actAs != "" {
		opts = append(opts, client.WithActAs(a.actAs))
	}
	return client.New(base, key, opts...), nil
}

// baseURL is the service URL: --url, else $GENESIS_URL, else the default.
func (a *app) baseURL() string {
	if a.url != "" {
		return a.url
	}
	if u := a.getenv(client.EnvURL); u != "" {
		return u
	}
	return client.DefaultURL
}

// key is the API key: --api-key, else $GENESIS_API_KEY ("" when neither).
func (a *app) key() string {
	if a.apiKey != "" {
		return a.apiKey
	}
	return a.getenv(client.EnvAPIKey)
}

// callContext bounds one API call by --timeout (0: no bound).
func (a *app) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return withTimeout(ctx, a.timeout)
}

// withTimeout is context.WithTimeout that treats d <= 0 as no timeout.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

// jsonOutput reports whether -o json was given.
func (a *app) jsonOutput() bool { return a.output == outputJSON }

// warnf prints a "genesis: " line on stderr.
func (a *app) warnf(format string, args ...any) {
	fmt.Fprintf(a.stderr, "genesis: "+format+"\n", args...)
}

// usageError is a mistake in how the command was invoked (exit status 2).
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usageErrorf returns a usage error with a formatted message.
func usageErrorf(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// exitError ends the program with code and prints nothing more; whatever
// had to be said was printed already.
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// report prints err as the program's last word and returns the exit code:
// 0 without error, 2 for usage errors, 1 for others, or an exitError's code.
func (a *app) report(cmd *cobra.Command, err error) int {
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	var ue *usageError
	if errors.As(err, &ue) || !a.started {
		a.warnf("%v", err)
		if cmd != nil {
			fmt.Fprintf(a.stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		}
		return 2
	}
	a.printError("", err)
	return 1
}

// printError prints a run-time error, after prefix and ": " when prefix is
// not empty. API errors show the problem detail, its code and the request
// id so the operator can find the server's log line. A line "hint: …"
// follows when a command, flag or environment variable helps.
func (a *app) printError(prefix string, err error) {
	if prefix != "" {
		prefix += ": "
	}
	msg, hint := a.failure(err)
	var ae *client.APIError
	switch {
	case errors.As(err, &ae):
		code := ae.Problem.Code
		if code == "" {
			code = fmt.Sprintf("http %d", ae.Status)
		}
		if ae.RequestID != "" {
			a.warnf("%s%s (%s, request id %s)", prefix, msg, code, ae.RequestID)
		} else {
			a.warnf("%s%s (%s)", prefix, msg, code)
		}
	case errors.Is(err, context.DeadlineExceeded):
		a.warnf("%s%v (no answer in time; see --timeout)", prefix, err)
	default:
		a.warnf("%s%s", prefix, msg)
	}
	if hint != "" {
		fmt.Fprintf(a.stderr, "hint: %s\n", hint)
	}
}
