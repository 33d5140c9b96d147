package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"genesis.dev/sandbox/client"
)

// newLogsCmd builds "genesis logs".
func newLogsCmd(a *app) *cobra.Command {
	var (
		follow bool
		cursor string
	)
	cmd := &cobra.Command{
		Use:   "logs [-f] [--cursor N] JOB",
		Short: "Print a job's output",
		Long: `Print a job's stdout to stdout and its stderr to stderr, byte for byte.

Without -f it prints what the job's log holds now and exits 0. With -f it
follows the job until it ends, resuming after dropped connections, and exits
with the job's status like "genesis exec". --cursor N starts after the event
with id N (see -o json, which prints each event as one JSON line with its
id). With -f the global --timeout applies only when given.`,
		Args: exactArgs(1, "one job id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			if cursor != "" && !isDigits(cursor) {
				return usageErrorf("--cursor wants an event id (a non-negative integer), got %q", cursor)
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			limit := a.timeout
			if follow && !cmd.Flags().Changed("timeout") {
				limit = 0 // a followed job may run for long
			}
			ctx, cancel := withTimeout(cmd.Context(), limit)
			defer cancel()
			var exit *client.ExitEvent
			err = c.StreamLogs(ctx, args[0], client.StreamOptions{Cursor: cursor, Follow: follow, Resume: true}, func(ev client.LogEvent) error {
				if ev.Event == client.EventExit {
					exit = ev.Exit
				}
				return a.writeEvent(ev)
			})
			if err != nil {
				return err
			}
			if !follow {
				return nil
			}
			if exit == nil {
				return errors.New("the log stream ended without the job's exit")
			}
			return a.reportEnd(endOfExit(exit), 0)
		}),
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "follow the job until it ends and exit with its status")
	cmd.Flags().StringVar(&cursor, "cursor", "", "start after the event with this id")
	return cmd
}

// newCancelCmd builds "genesis cancel".
func newCancelCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel JOB",
		Short: "Cancel a background job",
		Long: `Ask the service to kill a background job's whole process tree and print
the job's id. A job that already ended is left as it is (a note says so);
a synchronous job cannot be canceled.`,
		Args: exactArgs(1, "one job id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.Job, error) {
				return c.CancelJob(ctx, args[0])
			}, func(job *client.Job) error {
				switch job.State {
				case "succeeded", "failed", "canceled", "lost":
					a.warnf("job %s had already ended (%s)", job.ID, job.State)
				}
				_, err := fmt.Fprintln(a.stdout, job.ID)
				return err
			})
		}),
	}
}

// isDigits reports whether s is a non-empty string of ASCII digits.
func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
