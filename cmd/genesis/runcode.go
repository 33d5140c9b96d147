package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"genesis.dev/sandbox/client"
)

// newContextCmd builds "genesis context" and its subcommands.
func newContextCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "context",
		Aliases: []string{"contexts", "ctx"},
		Short:   "Python code contexts that keep variables between runs",
	}
	var language string
	create := &cobra.Command{
		Use:   "create SANDBOX",
		Short: "Start a code context in a sandbox and print its id",
		Long: `Start a Python code-interpreter context in a sandbox and print its id; run
code in it with "genesis run-code --context CTX". The sandbox's profile needs
python3.`,
		Args: exactArgs(1, "one sandbox id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return a.createSession(cmd, func(c *client.Client, ctx context.Context) (*client.Session, error) {
				return c.CreateContext(ctx, args[0], client.CreateContextRequest{Language: language})
			})
		}),
	}
	create.Flags().StringVar(&language, "language", "python", "language of the context")
	cmd.AddCommand(create, newSessionGetCmd(a, codeContexts), newSessionRemoveCmd(a, codeContexts))
	return cmd
}

// newRunCodeCmd builds "genesis run-code".
func newRunCodeCmd(a *app) *cobra.Command {
	var (
		contextID, file, saveDir string
		timeout                  time.Duration
		keep                     bool
	)
	cmd := &cobra.Command{
		Use:   "run-code [flags] (--context CTX | SANDBOX) (CODE | - | -f FILE)",
		Short: "Run Python code in a code context and print its result",
		Long: `Run Python code in a code context and print what it wrote (stdout and
stderr), then the value of its final expression on stdout. On an exception
the traceback goes to stderr and genesis exits 1.

With --context the code runs in that context, whose variables persist
between runs. Given a SANDBOX instead, a context is created for this run and
closed after it (--keep leaves it open and prints its id on stderr).

The code is the argument, or read from stdin when it is "-", or from the
file of -f (- for stdin). Rich outputs such as matplotlib figures are saved
into --save-dir as out-1.png, out-2.png, ...; without it they are only
counted. Here --timeout is the run's time limit (0: the service default).`,
		Args: func(cmd *cobra.Command, args []string) error {
			want := 1
			if contextID != "" {
				want = 0
			}
			if len(args) < want || len(args) > want+1 {
				if want == 0 {
					return usageErrorf("with --context, give the code as the only argument (or -f FILE)")
				}
				return usageErrorf("want SANDBOX and the code (or -f FILE), or --context CTX")
			}
			return noEmptyArgs(args[:want])
		},
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			target := contextID
			if target == "" {
				target, args = args[0], args[1:]
			}
			code, err := a.readCode(args, file)
			if err != nil {
				return err
			}
			if timeout < 0 {
				return usageErrorf("--timeout must not be negative")
			}
			if timeout%time.Millisecond != 0 {
				timeout = timeout.Truncate(time.Millisecond) + time.Millisecond
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			if contextID == "" {
				cctx, cancel := a.callContext(cmd.Context())
				se, err := c.CreateContext(cctx, target, client.CreateContextRequest{Language: "python"})
				cancel()
				if err != nil {
					return err
				}
				target = se.ID
				if keep {
					a.warnf("context %s kept; run more with --context %s", se.ID, se.ID)
				} else {
					defer a.closeContext(cmd.Context(), c, se.ID)
				}
			}
			wait := execWaitDefault
			if timeout > 0 {
				wait = timeout + execWaitGrace
			}
			ctx, cancel := withTimeout(cmd.Context(), wait)
			defer cancel()
			res, err := c.RunCode(ctx, target, client.RunCodeRequest{Code: code, TimeoutMS: timeout.Milliseconds()})
			if err != nil {
				return err
			}
			return a.relayRun(res, saveDir)
		}),
	}
	f := cmd.Flags()
	f.StringVar(&contextID, "context", "", "run in this code context (instead of a new one in SANDBOX)")
	f.StringVarP(&file, "file", "f", "", "read the code from this file (- for stdin)")
	f.StringVar(&saveDir, "save-dir", "", "save rich outputs (figures) into this directory")
	f.DurationVar(&timeout, "timeout", 0, "run time limit, e.g. 30s (0: service default)")
	f.BoolVar(&keep, "keep", false, "keep the context created in SANDBOX open")
	return cmd
}

// readCode returns the code from the argument, stdin ("-") or -f.
func (a *app) readCode(args []string, file string) (string, error) {
	var (
		b   []byte
		err error
	)
	switch {
	case len(args) == 1 && file != "":
		return "", usageErrorf("give the code either as an argument or with -f, not both")
	case len(args) == 0 && file == "":
		return "", usageErrorf("no code: give it as an argument, - for stdin, or -f FILE")
	case file == "-" || len(args) == 1 && args[0] == "-":
		b, err = io.ReadAll(a.stdin)
	case file != "":
		b, err = os.ReadFile(file)
	default:
		b = []byte(args[0])
	}
	if err != nil {
		return "", usageErrorf("reading the code: %v", err)
	}
	if strings.TrimSpace(string(b)) == "" {
		return "", usageErrorf("the code is empty")
	}
	return string(b), nil
}

// closeContext closes a context made for one run; a failure is a note.
func (a *app) closeContext(parent context.Context, c *client.Client, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), 30*time.Second)
	defer cancel()
	if err := c.DeleteContext(ctx, id); err != nil {
		a.printError("closing context "+id, err)
	}
}

// relayRun prints a run's result, saves its rich outputs and ends with 1
// when the code raised.
func (a *app) relayRun(res *client.RunCodeResult, saveDir string) error {
	if a.jsonOutput() {
		if err := printJSON(a.stdout, res); err != nil {
			return err
		}
	} else {
		if _, err := io.WriteString(a.stdout, res.Stdout); err != nil {
			return err
		}
		if _, err := io.WriteString(a.stderr, res.Stderr); err != nil {
			return err
		}
		if res.Value != nil {
			sep := ""
			if res.Stdout != "" && !strings.HasSuffix(res.Stdout, "\n") {
				sep = "\n"
			}
			if _, err := fmt.Fprintf(a.stdout, "%s%s\n", sep, *res.Value); err != nil {
				return err
			}
		}
		if e := res.Error; e != nil {
			// The kernel writes the traceback to stderr too: do not repeat it.
			tb := strings.Join(e.Traceback, "")
			if tb == "" {
				tb = e.Name + ": " + e.Value
			}
			if !strings.HasSuffix(tb, "\n") {
				tb += "\n"
			}
			if !strings.Contains(res.Stderr, tb) {
				if _, err := io.WriteString(a.stderr, tb); err != nil {
					return err
				}
			}
		}
	}
	if err := a.saveOutputs(res.Outputs, saveDir); err != nil {
		return err
	}
	if res.Status != "ok" {
		return &exitError{code: 1}
	}
	return nil
}

// saveOutputs writes rich outputs into dir as out-1.png, out-2.svg, ...;
// without dir it only says how many there were.
func (a *app) saveOutputs(outs []client.RichOutput, dir string) error {
	if len(outs) == 0 {
		return nil
	}
	if dir == "" {
		mimes := make([]string, len(outs))
		for i, o := range outs {
			mimes[i] = o.MIME
		}
		a.warnf("%d rich output(s) not saved (%s); use --save-dir DIR", len(outs), strings.Join(mimes, ", "))
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--save-dir: %w", err)
	}
	for i, o := range outs {
		b, err := base64.StdEncoding.DecodeString(o.Data)
		if err != nil {
			a.warnf("output %d (%s) is not valid base64: %v", i+1, o.MIME, err)
			continue
		}
		p := filepath.Join(dir, fmt.Sprintf("out-%d.%s", i+1, extensionOf(o.MIME)))
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return fmt.Errorf("saving output %d: %w", i+1, err)
		}
		a.warnf("saved %s (%s, %d bytes)", p, o.MIME, len(b))
	}
	return nil
}

// extensionOf returns the file extension for a rich output's media type.
func extensionOf(mime string) string {
	mt, _, _ := strings.Cut(mime, ";")
	switch strings.TrimSpace(strings.ToLower(mt)) {
	case "image/png":
		return "png"
	case "image/jpeg":
		return "jpg"
	case "image/gif":
		return "gif"
	case "image/svg+xml":
		return "svg"
	case "text/html":
		return "html"
	case "text/plain":
		return "txt"
	case "application/json":
		return "json"
	case "application/pdf":
		return "pdf"
	}
	return "bin"
}
