package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"genesis.dev/sandbox/client"
)

// newAuditCmd builds "genesis audit".
func newAuditCmd(a *app) *cobra.Command {
	var (
		q            client.AuditQuery
		since, until string
		follow       bool
		oldest       bool
		every        time.Duration
	)
	cmd := &cobra.Command{
		Use:   "audit [flags]",
		Short: "Show the audit log (your tenant's records; all with an admin key)",
		Long: `Show audit records, newest first: every POST, PUT, PATCH and DELETE with
who made it (key id), tenant, action, target, result and request id. One page
of --limit records; "--cursor C" (printed when more follow) goes on with older
ones. --oldest pages from the oldest record instead.
--follow prints the latest --limit records oldest first and then the new ones
as they come, until interrupted (with --oldest or --cursor: from there on).`,
		Args: exactArgs(0, "no arguments"),
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			for _, t := range []struct {
				flag, v string
				dst     *time.Time
			}{{"since", since, &q.Since}, {"until", until, &q.Until}} {
				if t.v == "" {
					continue
				}
				ts, err := parseSince(t.v, a.now())
				if err != nil {
					return usageErrorf("--%s: %v", t.flag, err)
				}
				*t.dst = ts
			}
			if q.Limit < 1 || q.Limit > 1000 {
				return usageErrorf("--limit must be between 1 and 1000")
			}
			if every <= 0 {
				return usageErrorf("--interval must be positive")
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			header := true
			if follow && !oldest && q.Cursor == "" {
				// Start with the latest records, in the order they came.
				first := q
				first.Newest = true
				ctx, cancel := a.callContext(cmd.Context())
				page, err := c.ListAudit(ctx, first)
				cancel()
				if err != nil {
					return err
				}
				slices.Reverse(page.Items)
				if err := a.printAudit(page, header); err != nil {
					return err
				}
				header = false
				q.Cursor = "0"
				if n := len(page.Items); n > 0 {
					q.Cursor = strconv.FormatInt(page.Items[n-1].Seq, 10)
				}
			}
			q.Newest = !follow && !oldest
			for {
				ctx, cancel := a.callContext(cmd.Context())
				page, err := c.ListAudit(ctx, q)
				cancel()
				if err != nil {
					return err
				}
				if err := a.printAudit(page, header); err != nil {
					return err
				}
				header = false
				q.Cursor = page.NextCursor
				if page.HasMore {
					if !follow {
						if q.Newest {
							a.warnf("older records: --cursor %s", page.NextCursor)
						} else {
							a.warnf("more records: --oldest --cursor %s", page.NextCursor)
						}
						return nil
					}
					continue
				}
				if !follow {
					return nil
				}
				select {
				case <-cmd.Context().Done():
					return nil
				case <-time.After(every):
				}
			}
		}),
	}
	f := cmd.Flags()
	f.StringVar(&q.Tenant, "tenant", "", "only this tenant's records (admin keys)")
	f.StringVar(&q.Action, "action", "", `only this action ("POST /v1/sandboxes") or method ("DELETE")`)
	f.StringVar(&q.Target, "target", "", "only records about this id")
	f.StringVar(&q.Result, "result", "", "only this status (404), class (4xx) or problem code (quota_exceeded)")
	f.StringVar(&since, "since", "", "records from this time on (RFC 3339, or a duration ago like 1h)")
	f.StringVar(&until, "until", "", "records before this time (RFC 3339, or a duration ago)")
	f.IntVar(&q.Limit, "limit", 100, "records per page (1-1000)")
	f.StringVar(&q.Cursor, "cursor", "", "continue from this cursor (printed when more records follow)")
	f.BoolVar(&oldest, "oldest", false, "page from the oldest record (default: newest first)")
	f.BoolVarP(&follow, "follow", "f", false, "print the latest records, then keep polling for new ones")
	f.DurationVar(&every, "interval", time.Second, "polling interval of --follow")
	return cmd
}

// parseSince reads an RFC 3339 time or a duration before now.
func parseSince(v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time nor a positive duration", v)
	}
	return now.Add(-d), nil
}

// printAudit prints one page: JSON lines with -o json, else a table (with
// its header when header is set).
func (a *app) printAudit(page *client.AuditPage, header bool) error {
	if a.jsonOutput() {
		enc := json.NewEncoder(a.stdout)
		for _, r := range page.Items {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	tw := newTable(a.stdout)
	if header {
		fmt.Fprintln(tw, "TIME\tACTOR\tTENANT\tACTION\tTARGET\tSTATUS\tCODE\tREQUEST")
	}
	for _, r := range page.Items {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.Time.UTC().Format(time.RFC3339), r.Actor, orDash(r.Tenant), r.Action,
			orDash(r.Target), r.Status, orDash(r.Code), orDash(r.RequestID))
	}
	return tw.Flush()
}
