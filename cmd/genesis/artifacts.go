package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"genesis.dev/sandbox/client"
)

// newArtifactsCmd builds "genesis artifacts" and its subcommands.
func newArtifactsCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "artifacts",
		Aliases: []string{"artifact"},
		Short:   "List and download the files jobs kept (exec --artifact GLOB)",
	}
	cmd.AddCommand(newArtifactsLsCmd(a), newArtifactsGetCmd(a))
	return cmd
}

// newArtifactsLsCmd builds "genesis artifacts ls JOB".
func newArtifactsLsCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "ls JOB",
		Aliases: []string{"list"},
		Short:   "List the artifacts of a job, and the matched files it skipped",
		Args:    exactArgs(1, "one job id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.ArtifactList, error) {
				return c.ListArtifacts(ctx, args[0])
			}, func(list *client.ArtifactList) error {
				return a.printArtifacts(list)
			})
		}),
	}
}

func (a *app) printArtifacts(list *client.ArtifactList) error {
	switch list.State {
	case "none":
		a.warnf("job %s asked for no artifacts", list.JobID)
		return nil
	case "pending":
		a.warnf("job %s is still running; its artifacts are collected when it ends", list.JobID)
	case "failed":
		a.warnf("collecting the artifacts of job %s failed: %s", list.JobID, list.Error)
	}
	if err := printTable(a.stdout, "ID\tPATH\tSIZE\tMIME\tSHA256", list.Items, func(tw io.Writer, it client.Artifact) {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", it.ID, it.Path, it.Size, it.MIME, it.SHA256[:min(12, len(it.SHA256))])
	}); err != nil {
		return err
	}
	if len(list.Skipped) == 0 {
		return nil
	}
	fmt.Fprintln(a.stdout)
	return printTable(a.stdout, "SKIPPED\tSIZE\tREASON", list.Skipped, func(tw io.Writer, s client.SkippedArtifact) {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", s.Path, s.Size, s.Reason)
	})
}

// newArtifactsGetCmd builds "genesis artifacts get ARTIFACT [-O FILE]".
func newArtifactsGetCmd(a *app) *cobra.Command {
	var dest, legacy string
	cmd := &cobra.Command{
		Use:   "get ARTIFACT [-O FILE|DIR]",
		Short: "Download an artifact to stdout, or to a file (checked against its SHA-256)",
		Long: `Download an artifact. Without -O it is written to stdout; with -O FILE it
is written to FILE (or to DIR/NAME when -O names a directory) through a
temporary file, and kept only when its SHA-256 matches the artifact's.
(-O/--output-file names the file written, as for the screenshots; the
former -o/--output is still read.)`,
		Args: exactArgs(1, "one artifact id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			if dest == "" {
				dest = legacy
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd.Context())
			defer cancel()
			d, err := c.DownloadArtifact(ctx, args[0], nil)
			if err != nil {
				return err
			}
			defer d.Body.Close()
			want := strings.Trim(d.ETag, `"`)
			if dest == "" {
				return copyChecked(a.stdout, d.Body, want)
			}
			if st, err := os.Stat(dest); err == nil && st.IsDir() {
				meta, err := c.GetArtifact(ctx, args[0])
				if err != nil {
					return err
				}
				dest = filepath.Join(dest, filepath.Base(meta.Name))
			}
			return writeFileAtomic(dest, 0o644, func(w io.Writer) error { return copyChecked(w, d.Body, want) })
		}),
	}
	cmd.Flags().StringVarP(&dest, "output-file", "O", "", "write to this file (or directory) instead of stdout")
	// The former name, kept for scripts: it shadows the global -o, whose
	// output format does not apply to content anyway.
	cmd.Flags().StringVarP(&legacy, "output", "o", "", "the same as --output-file")
	_ = cmd.Flags().MarkHidden("output")
	return cmd
}

// copyChecked copies r to w and fails when the content's SHA-256 is not
// want (when want is a SHA-256).
func copyChecked(w io.Writer, r io.Reader, want string) error {
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(w, h), r); err != nil {
		return fmt.Errorf("download cut short: %w", err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); len(want) == 64 && got != want {
		return fmt.Errorf("downloaded content has SHA-256 %s, want %s", got, want)
	}
	return nil
}

// writeFileAtomic writes a file through a temporary file in its directory,
// renamed into place only when fill succeeds.
func writeFileAtomic(name string, mode os.FileMode, fill func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // gone after the rename
	if err := fill(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), name)
}

// noteArtifacts tells, on stderr, what a job's artifact request kept.
func (a *app) noteArtifacts(jobID string, s *client.ArtifactSummary) {
	switch {
	case s == nil:
	case s.State == "failed":
		a.warnf("artifacts of job %s: %d kept, %d skipped; collection failed: %s", jobID, s.Collected, s.Skipped, s.Error)
	default:
		a.warnf("artifacts of job %s: %d kept (%d bytes), %d skipped; see genesis artifacts ls %s", jobID, s.Collected, s.CollectedBytes, s.Skipped, jobID)
	}
}
