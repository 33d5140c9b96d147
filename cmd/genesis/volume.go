package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"genesis.dev/sandbox/client"
)

// newVolumeCmd builds "genesis volume create|ls|get|rm|cp".
func newVolumeCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "volume",
		Aliases: []string{"volumes", "vol"},
		Short:   "Named volumes: directories that outlive sandboxes (mount with create --volume)",
	}
	cmd.AddCommand(newVolumeCreateCmd(a), newVolumeListCmd(a), newVolumeGetCmd(a), newVolumeRemoveCmd(a), newVolumeCpCmd(a))
	return cmd
}

// newVolumeCreateCmd builds "genesis volume create NAME --size-mb N".
func newVolumeCreateCmd(a *app) *cobra.Command {
	var size int64
	cmd := &cobra.Command{
		Use:   "create NAME --size-mb N",
		Short: "Create a volume of a hard size limit and print its name",
		Args:  exactArgs(1, "one volume name"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			if size <= 0 {
				return usageErrorf("--size-mb must be positive")
			}
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.Volume, error) {
				return c.CreateVolume(ctx, args[0], size)
			}, func(v *client.Volume) error {
				_, err := fmt.Fprintln(a.stdout, v.Name)
				return err
			})
		}),
	}
	cmd.Flags().Int64Var(&size, "size-mb", 0, "the volume's size in MiB, enforced (required)")
	return cmd
}

// newVolumeListCmd builds "genesis volume ls".
func newVolumeListCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List your volumes and the sandboxes that hold them",
		Args:    exactArgs(0, "no arguments"),
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) ([]client.Volume, error) {
				return c.ListVolumes(ctx)
			}, func(items []client.Volume) error {
				return printTable(a.stdout, "NAME\tUSED\tSIZE\tSTATE\tMOUNTED BY\tAGE", items, func(tw io.Writer, v client.Volume) {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", v.Name, usedText(v), sizeText(v.SizeMB<<20), v.State, holders(v), shortDuration(a.now().Sub(v.CreatedAt)))
				})
			})
		}),
	}
}

// usedText is what v's filesystem holds ("-" when the service does not
// know: the volume is not ready, or not mounted on its host now).
func usedText(v client.Volume) string {
	if v.UsedBytes == nil {
		return "-"
	}
	return sizeText(*v.UsedBytes)
}

// holders names the sandboxes that hold v ("-" for none), ":ro" after a
// reader.
func holders(v client.Volume) string {
	var out []string
	for _, m := range v.Mounts {
		s := m.SandboxID + ":" + m.Path
		if m.ReadOnly {
			s += ":ro"
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ",")
}

// newVolumeGetCmd builds "genesis volume get NAME".
func newVolumeGetCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "get NAME",
		Aliases: []string{"show", "inspect"},
		Short:   "Show one volume",
		Args:    exactArgs(1, "one volume name"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.Volume, error) {
				return c.GetVolume(ctx, args[0])
			}, func(v *client.Volume) error {
				return printFields(a.stdout, []field{
					{"Name", v.Name}, {"ID", v.ID}, {"Size", sizeText(v.SizeMB << 20)}, {"Used", usedText(*v)}, {"State", v.State},
					{"Mounted by", holders(*v)}, {"Created", formatTime(v.CreatedAt)},
				})
			})
		}),
	}
}

// newVolumeRemoveCmd builds "genesis volume rm NAME...".
func newVolumeRemoveCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "rm NAME...",
		Aliases: []string{"delete", "remove"},
		Short:   "Delete volumes and their data (a mounted one is refused; deleted ones are fine)",
		Args: func(cmd *cobra.Command, args []string) error {
			if err := minArgs(1, "at least one volume name")(cmd, args); err != nil {
				return err
			}
			return noEmptyArgs(args)
		},
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			return a.removeEach(cmd, args, c.DeleteVolume)
		}),
	}
}

// volumeRef is VOLUME:PATH of a copy.
type volumeRef struct{ name, path string }

func parseVolumeRef(arg string) (volumeRef, bool) {
	i := strings.IndexByte(arg, ':')
	if i <= 0 || strings.ContainsRune(arg[:i], '/') {
		return volumeRef{}, false
	}
	return volumeRef{name: arg[:i], path: arg[i+1:]}, true
}

// newVolumeCpCmd builds "genesis volume cp SRC DST" (files; one side
// VOLUME:PATH).
func newVolumeCpCmd(a *app) *cobra.Command {
	var mode string
	cmd := &cobra.Command{
		Use:   "cp [--mode M] SRC DST",
		Short: "Copy a file between this host and a volume (VOLUME:PATH), no sandbox needed",
		Long: `Copy one file between this host and a volume. Exactly one of SRC and DST
is VOLUME:PATH (PATH relative to the volume's root); the other is a local
path, or - for stdin/stdout. An upload is written whole or not at all;
writing past the volume's size is refused (413 volume_full).`,
		Args: exactArgs(2, "SRC and DST"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			src, srcVol := parseVolumeRef(args[0])
			dst, dstVol := parseVolumeRef(args[1])
			if srcVol == dstVol {
				return usageErrorf("exactly one of SRC and DST must be VOLUME:PATH")
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd.Context())
			defer cancel()
			if dstVol {
				return a.volumeUpload(ctx, c, args[0], dst, mode)
			}
			return a.volumeDownload(ctx, c, src, args[1])
		}),
	}
	cmd.Flags().StringVar(&mode, "mode", "", "octal permission bits of the uploaded file (default: the local file's)")
	return cmd
}

func (a *app) volumeUpload(ctx context.Context, c *client.Client, local string, dst volumeRef, mode string) error {
	var body io.Reader = a.stdin
	size := int64(-1)
	target := dst.path
	if local != "-" {
		f, err := os.Open(local)
		if err != nil {
			return err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return err
		}
		if st.IsDir() {
			return usageErrorf("volume cp copies files; %s is a directory", local)
		}
		if mode == "" {
			mode = fmt.Sprintf("%04o", st.Mode().Perm())
		}
		body, size = f, st.Size()
		if target == "" || strings.HasSuffix(target, "/") {
			target += filepath.Base(local)
		}
	} else if target == "" || strings.HasSuffix(target, "/") {
		return usageErrorf("copying stdin needs a file name in DST")
	}
	w, err := c.WriteVolumeFile(ctx, dst.name, target, body, client.WriteFileOptions{Mode: mode, Size: size})
	if err != nil {
		return err
	}
	if a.jsonOutput() {
		return printJSON(a.stdout, w)
	}
	_, err = fmt.Fprintf(a.stdout, "%s:%s (%s)\n", dst.name, w.Path, sizeText(w.Size))
	return err
}

func (a *app) volumeDownload(ctx context.Context, c *client.Client, src volumeRef, local string) error {
	if src.path == "" {
		return usageErrorf("SRC needs a path after VOLUME:")
	}
	d, err := c.ReadVolumeFile(ctx, src.name, src.path, nil)
	if err != nil {
		return err
	}
	defer d.Body.Close()
	if local == "-" {
		_, err = io.Copy(a.stdout, d.Body)
		return err
	}
	target := local
	if st, err := os.Stat(local); err == nil && st.IsDir() {
		target = filepath.Join(local, filepath.Base(src.path))
	}
	return writeFileAtomic(target, 0o644, func(w io.Writer) error {
		n, err := io.Copy(w, d.Body)
		if err == nil && d.Length >= 0 && n != d.Length {
			return fmt.Errorf("download of %s:%s cut short: %d of %d bytes", src.name, src.path, n, d.Length)
		}
		return err
	})
}

// parseVolumeFlags reads --volume NAME:/PATH[:ro] values.
func parseVolumeFlags(values []string) ([]client.VolumeMount, error) {
	var out []client.VolumeMount
	for _, v := range values {
		parts := strings.Split(v, ":")
		ro := false
		switch {
		case len(parts) == 3 && parts[2] == "ro":
			ro = true
		case len(parts) == 3 && parts[2] == "rw":
		case len(parts) == 2:
		default:
			return nil, usageErrorf("--volume %q: want NAME:/PATH or NAME:/PATH:ro", v)
		}
		if parts[0] == "" || parts[1] == "" {
			return nil, usageErrorf("--volume %q: want NAME:/PATH or NAME:/PATH:ro", v)
		}
		out = append(out, client.VolumeMount{Volume: parts[0], Path: parts[1], ReadOnly: ro})
	}
	return out, nil
}
