package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"genesis.dev/sandbox/client"
)

// newCapabilitiesCmd builds "genesis capabilities".
func newCapabilitiesCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "capabilities",
		Aliases: []string{"caps"},
		Short:   "Show the driver, runtimes, features and profiles the service found",
		Args:    exactArgs(0, "no arguments"),
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.Capabilities, error) {
				return c.Capabilities(ctx)
			}, func(caps *client.Capabilities) error {
				return printCapabilities(a.stdout, caps)
			})
		}),
	}
}

// printCapabilities writes the readable summary of a probe result.
func printCapabilities(w io.Writer, c *client.Capabilities) error {
	driver := c.Driver + " (healthy)"
	if !c.Healthy {
		driver = c.Driver + " (unhealthy"
		if c.Error != "" {
			driver += ": " + c.Error
		}
		driver += ")"
	}
	daemon := c.DaemonVersion
	if c.APIVersion != "" {
		daemon += " (API " + c.APIVersion + ")"
	}
	cgroup := c.CgroupVersion
	if cgroup != "" && !strings.HasPrefix(cgroup, "v") {
		cgroup = "v" + cgroup
	}
	if err := printFields(w, []field{
		{"Driver", driver},
		{"Daemon version", strings.TrimSpace(daemon)},
		{"Kernel", c.KernelVersion},
		{"Cgroup", cgroup},
		{"Checkpoint", featureText(c.Checkpoint)},
		{"Disk quota", featureText(c.DiskQuota)},
		{"Volumes", volumesText(c.Volumes)},
		{"Checked", formatTime(c.CheckedAt)},
	}); err != nil {
		return err
	}

	fmt.Fprintln(w, "\nRuntimes:")
	tw := newTable(w)
	if len(c.Runtimes) == 0 {
		fmt.Fprintln(tw, "  (none found)")
	}
	for _, r := range c.Runtimes {
		status, detail := "healthy", ""
		if !r.Healthy {
			status = "unhealthy"
			detail = r.Error
		} else if r.SmokeMS > 0 {
			detail = fmt.Sprintf("smoke test %dms", r.SmokeMS)
		}
		if keeps := stateFeatures(r.Features); r.Healthy && keeps != "" {
			detail += "; keeps state: " + keeps
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", r.Name, status, orDash(r.Version), detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	if len(c.RiskPolicy) > 0 {
		fmt.Fprintln(w, "\nRisk policy:")
		levels := make([]string, 0, len(c.RiskPolicy))
		for l := range c.RiskPolicy {
			levels = append(levels, l)
		}
		sort.Slice(levels, func(i, j int) bool {
			ri, rj := riskRank(levels[i]), riskRank(levels[j])
			return ri < rj || ri == rj && levels[i] < levels[j]
		})
		tw = newTable(w)
		for _, l := range levels {
			rts := strings.Join(c.RiskPolicy[l], ", ")
			if rts == "" {
				rts = "none on this host"
			}
			fmt.Fprintf(tw, "  %s\t%s\n", l, rts)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}

	fmt.Fprintln(w, "\nProfiles:")
	return printProfileRows(w, c.Profiles, "  ")
}

// riskLevels are the risk levels from most to least trusted.
var riskLevels = []string{"trusted", "low", "medium", "high", "untrusted"}

// riskRank is a level's place in riskLevels; unknown levels come after.
func riskRank(level string) int {
	for i, l := range riskLevels {
		if l == level {
			return i
		}
	}
	return len(riskLevels)
}

// featureText describes an optional feature in a few words.
func featureText(f client.Feature) string {
	if !f.Supported {
		if f.Reason != "" {
			return "not supported: " + f.Reason
		}
		return "not supported"
	}
	s := "supported"
	if f.Enforced {
		s += ", enforced"
	} else {
		s += ", not enforced"
	}
	if f.Method != "" {
		s += " (" + f.Method + ")"
	}
	if f.Reason != "" {
		s += ": " + f.Reason
	}
	return s
}

// volumesText says whether named volumes can be made here, under which
// roots and up to what size.
func volumesText(v client.VolumesCapability) string {
	if !v.Supported {
		if v.Reason == "" {
			return "unsupported"
		}
		return "unsupported: " + v.Reason
	}
	s := "supported, mounted below " + strings.Join(v.Roots, ", ")
	if v.MaxSizeMB > 0 {
		s += fmt.Sprintf("; at most %d MiB each", v.MaxSizeMB)
	}
	return s
}

// stateFeatures lists what a runtime can do to keep a sandbox's state
// (docs/snapshots.md): "pause, files, memory", or "" for none.
func stateFeatures(f client.RuntimeFeatures) string {
	var have []string
	for _, x := range []struct {
		name string
		f    client.Feature
	}{{"pause", f.Pause}, {"files", f.FSSnapshot}, {"memory", f.MemoryCheckpoint}} {
		if x.f.Supported {
			have = append(have, x.name)
		}
	}
	return strings.Join(have, ", ")
}
