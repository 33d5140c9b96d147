package main

import (
	"context"
	"fmt"
	"strconv"
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
	cmd.AddCommand(newJobGetCmd(a))
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
