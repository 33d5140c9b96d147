package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"genesis.dev/sandbox/client"
)

// newJobCmd builds "genesis job" and its subcommands.
func newJobCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "job",
		Aliases: []string{"jobs"},
		Short:   "Show job records",
	}
	cmd.AddCommand(newJobGetCmd(a), newJobListCmd(a))
	return cmd
}

// newJobListCmd builds "genesis job ls SANDBOX".
func newJobListCmd(a *app) *cobra.Command {
	var limit int
	var states []string
	cmd := &cobra.Command{
		Use:     "ls SANDBOX [--state running] [--limit 100]",
		Aliases: []string{"list"},
		Short:   "List a sandbox's jobs, newest first",
		Args:    exactArgs(1, "one sandbox id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.JobList, error) {
				return c.ListSandboxJobs(ctx, args[0], limit, states...)
			}, func(l *client.JobList) error {
				tw := newTable(a.stdout)
				fmt.Fprintln(tw, "JOB\tSTATE\tEXIT\tCREATED\tCOMMAND")
				for _, j := range l.Items {
					exit := ""
					if j.ExitCode != nil {
						exit = strconv.Itoa(*j.ExitCode)
					}
					cmdline := strings.Join(j.Command, " ")
					if cmdline == "" {
						cmdline = j.Script
					}
					if len(cmdline) > 60 {
						cmdline = cmdline[:57] + "..."
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", j.ID, j.State, exit, j.CreatedAt.Format(time.RFC3339), cmdline)
				}
				return tw.Flush()
			})
		}),
	}
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many (default 100, at most 500)")
	cmd.Flags().StringSliceVar(&states, "state", nil, "only jobs in these states (pending, running, succeeded, failed, canceled, lost)")
	return cmd
}

// newJobGetCmd builds "genesis job get".
func newJobGetCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "get JOB",
		Short: "Show one job",
		Args:  exactArgs(1, "one job id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.Job, error) {
				return c.GetJob(ctx, args[0])
			}, func(job *client.Job) error {
				return printFields(a.stdout, jobFields(job))
			})
		}),
	}
}

// jobFields is the text detail view of a job.
func jobFields(j *client.Job) []field {
	exit := ""
	if j.ExitCode != nil {
		exit = strconv.Itoa(*j.ExitCode)
	}
	if j.ExitReason != "" {
		reason := j.ExitReason
		if j.Signal != "" {
			reason += " " + j.Signal
		}
		if exit == "" {
			exit = reason
		} else {
			exit += " (" + reason + ")"
		}
	}
	timeout := ""
	if j.TimeoutMS > 0 {
		timeout = (time.Duration(j.TimeoutMS) * time.Millisecond).String()
	} else if j.Mode == "background" {
		timeout = "none (runs until it ends, is cancelled, or its sandbox ends)"
	}
	duration := ""
	if j.StartedAt != nil && j.FinishedAt != nil {
		duration = j.FinishedAt.Sub(*j.StartedAt).Round(time.Millisecond).String()
	}
	fields := []field{
		{"ID", j.ID},
		{"Sandbox", j.SandboxID},
		{"State", j.State},
	}
	if len(j.Command) > 0 {
		fields = append(fields, field{"Command", shellJoin(j.Command)})
	}
	fields = append(fields,
		field{"Script", j.Script},
		field{"Cwd", j.Cwd},
		field{"Exit", exit},
		field{"Error", j.Error},
		field{"Stdout", streamSummary(j.StdoutBytes, j.StdoutTruncated)},
		field{"Stderr", streamSummary(j.StderrBytes, j.StderrTruncated)},
		field{"Timeout", timeout},
		field{"Created", formatTime(j.CreatedAt)},
	)
	if j.StartedAt != nil {
		fields = append(fields, field{"Started", formatTime(*j.StartedAt)})
	}
	if j.FinishedAt != nil {
		fields = append(fields, field{"Finished", formatTime(*j.FinishedAt)})
	}
	return append(fields, field{"Duration", duration})
}

// streamSummary describes the size of one output stream.
func streamSummary(n int64, truncated bool) string {
	s := fmt.Sprintf("%d bytes", n)
	if truncated {
		s += " (truncated)"
	}
	return s
}
