package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"genesis.dev/sandbox/client"
)

// imagesFollowEvery is how often `genesis images --follow` asks.
const imagesFollowEvery = 2 * time.Second

// newImagesCmd builds "genesis images".
func newImagesCmd(a *app) *cobra.Command {
	var follow bool
	cmd := &cobra.Command{
		Use:     "images",
		Aliases: []string{"image"},
		Short:   "List the profiles' images and the progress of their background builds",
		Long: `List the images the profiles run: present, or queued, building or failed
in the service's background builds (sandbox-service serve --build-images),
with each build's step and progress.

With --follow, print a line whenever an image's build moves on, until no
image is queued or building any more; the exit code is 1 when a build failed.`,
		Args: exactArgs(0, "no arguments"),
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			if !follow {
				return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.ImageList, error) {
					return c.Images(ctx)
				}, func(list *client.ImageList) error {
					return printImages(a.stdout, list.Items)
				})
			}
			return followImages(cmd.Context(), a)
		}),
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "follow the background builds until they end")
	return cmd
}

// printImages prints the image table, then how to build the missing
// images that the service does not build.
func printImages(w io.Writer, items []client.Image) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "NAME\tSTATUS\tPROGRESS\tPROFILES")
	var missing []client.Image
	for _, im := range items {
		progress := "-"
		if im.Build != nil && im.Status != "failed" {
			progress = buildProgress(im.Build)
		}
		if im.Status == "not_built" || im.Status == "failed" {
			missing = append(missing, im)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", im.Name, strings.ReplaceAll(im.Status, "_", " "), progress, strings.Join(im.Profiles, ","))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, im := range missing {
		switch {
		case im.Status == "failed" && im.Build != nil:
			fmt.Fprintf(w, "%s: the build failed: %s\n", im.Name, firstLineOf(im.Build.Error))
		case im.BuildCommand != "":
			fmt.Fprintf(w, "%s: image %s is not built (%s)\n", im.Name, im.Ref, im.BuildCommand)
		}
	}
	return nil
}

// buildProgress is a build's progress in a table cell: "42% packages
// (2/4) 120/456 packages: Unpacking python3 ..." .
func buildProgress(b *client.ImageBuild) string {
	switch b.State {
	case "queued":
		return "-"
	case "waiting":
		return "waiting: " + b.Detail
	}
	s, _ := strings.CutPrefix(b.Summary, "building ")
	if b.Detail != "" {
		s += ": " + b.Detail
	}
	return s
}

func firstLineOf(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// followImages prints a line for each image whose state or progress
// changed since the last look, until none is queued or building.
func followImages(ctx context.Context, a *app) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	last := map[string]string{}
	for {
		cctx, cancel := a.callContext(ctx)
		list, err := c.Images(cctx)
		cancel()
		if err != nil {
			return err
		}
		active, failed := 0, 0
		for _, im := range list.Items {
			line := strings.ReplaceAll(im.Status, "_", " ")
			switch {
			case im.Status == "failed" && im.Build != nil:
				failed++
				line += ": " + firstLineOf(im.Build.Error)
			case im.Build != nil && im.Status != "queued":
				line += " " + buildProgress(im.Build)
			}
			if im.Status == "queued" || im.Status == "building" {
				active++
			}
			if last[im.Name] != line {
				last[im.Name] = line
				if a.jsonOutput() {
					if err := printJSON(a.stdout, im); err != nil {
						return err
					}
				} else {
					fmt.Fprintf(a.stdout, "%s %s: %s\n", a.now().Format("15:04:05"), im.Name, line)
				}
			}
		}
		if active == 0 {
			if failed > 0 {
				return &exitError{code: 1}
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(imagesFollowEvery):
		}
	}
}
