package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"genesis.dev/sandbox/client"
)

// newTraceCmd builds "genesis trace" and its subcommands.
func newTraceCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "trace",
		Short: "Read a sandbox's operation trace and add to it (docs/trace.md)",
	}
	cmd.AddCommand(newTraceFollowCmd(a), newTraceAnnotateCmd(a), newTraceExportCmd(a), newTraceReplayCmd(a))
	for _, op := range []string{"pause", "resume", "step", "abort"} {
		cmd.AddCommand(newTraceInterruptCmd(a, op))
	}
	return cmd
}

// traceInterruptShort says what each interrupt verb does.
var traceInterruptShort = map[string]string{
	"pause":  "Pause a sandbox's agent: its next exec or job answers 409 paused",
	"resume": "Let a paused or aborted sandbox's agent act again",
	"step":   "Let one agent action through while paused",
	"abort":  "Cancel the agent's running jobs and refuse its actions until resume",
}

// newTraceInterruptCmd builds "genesis trace pause|resume|step|abort SANDBOX".
func newTraceInterruptCmd(a *app, op string) *cobra.Command {
	var actor string
	cmd := &cobra.Command{
		Use:   op + " [--actor human:WHO] SANDBOX",
		Short: traceInterruptShort[op],
		Long: traceInterruptShort[op] + `. Prints the agent's state (running,
paused or aborted), the steps left and, for abort, the canceled jobs. The
operation is recorded in the sandbox's trace by --actor (default api).`,
		Args: exactArgs(1, "one sandbox id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.TraceInterruption, error) {
				return c.InterruptTrace(ctx, args[0], op, actor)
			}, func(st *client.TraceInterruption) error {
				line := fmt.Sprintf("%s, %d steps left", st.State, st.Steps)
				if len(st.CanceledJobs) > 0 {
					line += ", canceled " + strings.Join(st.CanceledJobs, " ")
				}
				_, err := fmt.Fprintln(a.stdout, line)
				return err
			})
		}),
	}
	cmd.Flags().StringVar(&actor, "actor", "", "who: api (default) or human:<who>")
	return cmd
}

// newTraceFollowCmd builds "genesis trace follow SANDBOX".
func newTraceFollowCmd(a *app) *cobra.Command {
	var (
		cursor string
		noWait bool
	)
	cmd := &cobra.Command{
		Use:   "follow [--cursor N] [--no-follow] SANDBOX",
		Short: "Print a sandbox's trace events as they happen",
		Long: `Print the events of a sandbox's trace, one line each (one JSON object a
line with -o json), after the event with seq --cursor (default: from the
start). It follows new events until interrupted, resuming after dropped
connections with no gap or duplicate; --no-follow stops at the end. With
following, the global --timeout applies only when given.`,
		Args: exactArgs(1, "one sandbox id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			var after int64
			if cursor != "" {
				if !isDigits(cursor) {
					return usageErrorf("--cursor wants an event seq (a non-negative integer), got %q", cursor)
				}
				after, _ = strconv.ParseInt(cursor, 10, 64)
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			limit := a.timeout
			if !noWait && !cmd.Flags().Changed("timeout") {
				limit = 0
			}
			ctx, cancel := withTimeout(cmd.Context(), limit)
			defer cancel()
			return c.FollowTrace(ctx, args[0], after, !noWait, func(e client.TraceEvent) error {
				if a.jsonOutput() {
					b, err := json.Marshal(e)
					if err != nil {
						return err
					}
					_, err = fmt.Fprintf(a.stdout, "%s\n", b)
					return err
				}
				_, err := fmt.Fprintf(a.stdout, "%d\t%s\t%s\t%s\t%s\n", e.Seq, e.Time.Format("15:04:05.000"), e.Actor, e.Kind, e.Data)
				return err
			})
		}),
	}
	cmd.Flags().StringVar(&cursor, "cursor", "", "start after the event with this seq")
	cmd.Flags().BoolVar(&noWait, "no-follow", false, "stop at the end of the trace")
	return cmd
}

// newTraceAnnotateCmd builds "genesis trace annotate SANDBOX TEXT".
func newTraceAnnotateCmd(a *app) *cobra.Command {
	var (
		status string
		actor  string
	)
	cmd := &cobra.Command{
		Use:   "annotate [--status STATE] [--actor WHO] SANDBOX TEXT",
		Short: "Add an annotation (or, with --status, a task status) to a sandbox's trace",
		Long: `Append the caller's event to a sandbox's trace: an annotation
{"text": TEXT}, or with --status a task status {"status": STATE, "text":
TEXT}. --actor is api (default), agent or human:<who>. Prints the event's
seq.`,
		Args: exactArgs(2, "a sandbox id and a text"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			req := client.TraceEventRequest{Kind: "annotation", Actor: actor}
			data := map[string]string{"text": args[1]}
			if status != "" {
				req.Kind, data["status"] = "task.status", status
			}
			req.Data, _ = json.Marshal(data)
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.TraceEvent, error) {
				return c.PostTraceEvent(ctx, args[0], req)
			}, func(e *client.TraceEvent) error {
				_, err := fmt.Fprintln(a.stdout, e.Seq)
				return err
			})
		}),
	}
	cmd.Flags().StringVar(&status, "status", "", "post a task status (e.g. running, done, failed) instead of an annotation")
	cmd.Flags().StringVar(&actor, "actor", "", "who: api (default), agent or human:<who>")
	return cmd
}

// newTraceExportCmd builds "genesis trace export SANDBOX FILE".
func newTraceExportCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "export SANDBOX FILE",
		Short: "Save a sandbox's trace as a tar.gz (events, screenshots, manifest with sha256s)",
		Long: `Download the trace archive of a sandbox into FILE ("-" for stdout):
events.jsonl, the screenshots and video segments its events name,
player.html (open the unpacked archive in a browser, offline) and
manifest.json with every file's sha256. It works while the trace is retained, also after the sandbox
is gone.`,
		Args: exactArgs(2, "a sandbox id and a file"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd.Context())
			defer cancel()
			body, err := c.ExportTrace(ctx, args[0])
			if err != nil {
				return err
			}
			defer body.Close()
			if args[1] == "-" {
				_, err = io.Copy(a.stdout, body)
				return err
			}
			f, err := os.Create(args[1])
			if err != nil {
				return err
			}
			if _, err := io.Copy(f, body); err != nil {
				f.Close()
				os.Remove(args[1])
				return err
			}
			return f.Close()
		}),
	}
}

// newTraceReplayCmd builds "genesis trace replay SANDBOX TARGET".
func newTraceReplayCmd(a *app) *cobra.Command {
	var threshold float64
	cmd := &cobra.Command{
		Use:   "replay SANDBOX TARGET [--threshold 0.02]",
		Short: "Run the agent actions of SANDBOX's trace again on TARGET (same profile) and report the differences",
		Args:  exactArgs(2, "the sandbox whose trace, and a target sandbox"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.ReplayReport, error) {
				return c.ReplayTrace(ctx, args[0], client.ReplayRequest{TargetSandbox: args[1], Threshold: threshold})
			}, func(rep *client.ReplayReport) error {
				for _, st := range rep.Steps {
					extra := st.Reason
					if st.ScreenshotDiff != nil {
						extra = fmt.Sprintf("screenshot %.1f%% different %s", 100**st.ScreenshotDiff, extra)
					}
					if _, err := fmt.Fprintf(a.stdout, "%d\t%s\t%s\t%s\t%s\n", st.Seq, st.Kind, st.Action, st.Status, extra); err != nil {
						return err
					}
				}
				_, err := fmt.Fprintf(a.stdout, "same %d, differs %d, failed %d, skipped %d in %d ms\n", rep.Same, rep.Differs, rep.Failed, rep.Skipped, rep.Duration)
				return err
			})
		}),
	}
	cmd.Flags().Float64Var(&threshold, "threshold", 0, "fraction of a screenshot's pixels that may differ (default 0.02)")
	return cmd
}
